"""Protocol-faithful local fakes of the services an agent uses (ASGI apps on loopback)."""
