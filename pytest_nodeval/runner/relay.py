"""Run inside the world: the program's doors to the proxy and to the user.

`python3 relay.py CONFIG_JSON` starts the program with the environment CONFIG names and exits
with the program's status. Two doors, each optional:

- `socket`: the proxy's Unix socket, for a world whose network is its own. The relay listens
  on a free loopback port, forwards every connection there, and fills each environment
  value's `{url}` with its own URL.
- `talk`: a Unix socket where nodeval holds the conversation (`stdio: jsonl`). It becomes the
  program's stdin and stdout, so nothing is copied on the way.

Standard library only: the world has python3 and nothing of nodeval.
"""

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading


def pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def forward(conn: socket.socket, unix_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect(unix_path)
    except OSError:
        conn.close()
        return
    threading.Thread(target=pipe, args=(upstream, conn), daemon=True).start()
    pipe(conn, upstream)


def serve(listener: socket.socket, unix_path: str) -> None:
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=forward, args=(conn, unix_path), daemon=True).start()


def proxy_door(unix_path: str) -> str:
    """A loopback port forwarded to the proxy's socket; returns its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    threading.Thread(target=serve, args=(listener, unix_path), daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


def main() -> None:
    config = json.loads(sys.argv[1])
    url = proxy_door(config["socket"]) if config.get("socket") else ""
    env = dict(os.environ)
    env.update({name: value.replace("{url}", url) for name, value in config["env"].items()})
    talk = None
    if config.get("talk"):
        talk = socket.socket(socket.AF_UNIX)
        talk.connect(config["talk"])
    fd = talk.fileno() if talk is not None else None  # None: inherit the relay's own
    program = subprocess.Popen(config["argv"], env=env, stdin=fd, stdout=fd)
    if talk is not None:
        talk.close()  # the program holds it now: its exit is the conversation's end of file
    sys.exit(program.wait())


if __name__ == "__main__":
    main()
