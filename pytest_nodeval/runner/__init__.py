"""One attempt at a case in a mode (replay, live, record), and the local fakes a live attempt
starts."""
