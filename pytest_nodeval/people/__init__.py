"""People around the agent: the simulated user (scripted, replayed, or a persona) and the judge."""
