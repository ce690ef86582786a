"""The agent under test: the reference engine, its config, providers and tools, and the
adapter (`AgentContext`, `@tool`) that records and replays an agent of your own."""
