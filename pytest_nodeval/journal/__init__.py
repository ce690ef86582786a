"""The journal: event models, writer and reader, redaction, the replay stash, the httpx2
transports."""
