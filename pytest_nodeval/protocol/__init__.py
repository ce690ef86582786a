"""`nodeval inspect-mode`: one JSON request on stdin, one JSON response on stdout, and its
worker."""
