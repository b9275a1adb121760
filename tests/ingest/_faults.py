"""A fault-injecting HTTP relay in front of a real agent server: the broken or hostile peer of
the trust tests. Every request goes to the real server; ``fault`` (set by the test) may then
rewrite the answer, hold it back until ``release`` (or for ever), or answer slowly."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ._fleet import free_port

#: (path, query, status, body) -> (status, body); the body is the parsed JSON answer.
Rewrite = Callable[[str, dict[str, list[str]], int, Any], tuple[int, Any]]


class FaultyRelay:
    def __init__(self, target: str, key: str) -> None:
        self.target = target.rstrip("/")
        self.key = key
        self.rewrite: Rewrite | None = None
        self.hold = threading.Event()  # set: answers wait until released
        self.released = threading.Event()
        self.held = 0  # requests waiting now
        self.trickle = 0.0  # > 0: the answer's bytes go out one at a time, this many s apart
        self.lock = threading.Lock()
        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def honest(self) -> None:
        self.rewrite = None
        self.trickle = 0.0
        self.hold.clear()
        self.released.set()

    def hang(self) -> None:
        self.released.clear()
        self.hold.set()

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def fetch(self, path_and_query: str) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.target + path_and_query, headers={"X-Session-API-Key": self.key}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            raw = error.read()
            error.close()
            return error.code, json.loads(raw) if raw else None

    def _answer(self, raw_path: str) -> tuple[int, bytes]:
        if self.hold.is_set():
            with self.lock:
                self.held += 1
            try:
                self.released.wait(120)
            finally:
                with self.lock:
                    self.held -= 1
        status, body = self.fetch(raw_path)
        rewrite = self.rewrite
        if rewrite is not None:
            parts = urlsplit(raw_path)
            status, body = rewrite(parts.path, parse_qs(parts.query), status, body)
        return status, json.dumps(body).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                try:
                    status, body = relay._answer(self.path)
                except Exception:  # a relay that breaks answers as a server would
                    status, body = 500, b'{"detail": "relay failed"}'
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    if relay.trickle:
                        for byte in body:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(relay.trickle)
                    else:
                        self.wfile.write(body)
                except OSError:
                    pass  # the ingest gave up on this answer (its timeout)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
