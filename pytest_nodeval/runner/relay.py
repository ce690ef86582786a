"""Run inside a world whose network is its own: the program's loopback door to the proxy.

`python3 relay.py CONFIG_JSON`: listens on a free loopback port, starts the program with the
environment CONFIG names (each value's `{url}` filled with this relay's URL), forwards every
connection to the proxy's Unix socket, and exits with the program's status. Standard library
only: the world has python3 and nothing of nodeval.
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


def main() -> None:
    config = json.loads(sys.argv[1])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    threading.Thread(target=serve, args=(listener, config["socket"]), daemon=True).start()
    env = dict(os.environ)
    env.update({name: value.replace("{url}", url) for name, value in config["env"].items()})
    sys.exit(subprocess.call(config["argv"], env=env))


if __name__ == "__main__":
    main()
