"""A TCP relay to a PostgreSQL server that can lose one reply: an ambiguous commit, for real.

Armed with a marker, it relays the first client message that contains the marker to the
server, waits for the server's answer, drops it and closes both sides. The server has done
the work (a COMMIT, an autocommit statement); the client only sees its connection die.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class CuttingProxy:
    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._marker: bytes | None = None
        self._lock = threading.Lock()
        self.cut = threading.Event()  # set once a reply was dropped
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: bytes) -> None:
        with self._lock:
            self._marker = marker
            self.cut.clear()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            threading.Thread(target=self._relay, args=(client, server), daemon=True).start()

    def _take_marker(self, data: bytes) -> bool:
        with self._lock:
            if self._marker is not None and self._marker in data:
                self._marker = None
                return True
            return False

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        # One thread per connection, so nothing can pass the server's reply on while it is
        # being dropped.
        with client, server:
            while not self._closed:
                readable, _, _ = select.select([client, server], [], [], 0.5)
                for side in readable:
                    data = side.recv(65536)
                    if not data:
                        return
                    if side is server:
                        client.sendall(data)
                    elif self._take_marker(data):
                        server.sendall(data)
                        server.settimeout(10)
                        server.recv(65536)  # the server answered: the work is done
                        self.cut.set()
                        return
                    else:
                        server.sendall(data)
