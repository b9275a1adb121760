"""The real processes of the fleet tests: a scripted OpenAI-compatible LLM (a thread of the
test process), ``openhands-agent-server`` processes and ``viewstore ingest`` processes, and
the checks that compare a stored conversation with its agent server's own log."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from viewstore import EventStore

TOKEN = "fleet-test-token"
SESSION_KEY_PREFIX = "session-key-"
BIN = Path(sys.executable).parent
HOST = ("--host", "127.0.0.1")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- the LLM


class ScriptedLLM:
    """``POST /v1/chat/completions``: a conversation is known by its first user message,
    which carries ``rounds=N``; its first N replies are two parallel ``think`` calls (one tool
    batch), the next a ``finish``. With ``sleep_at=K`` reply K is a ``think`` and a
    ``terminal`` call that sleeps a minute. A request without tools is the condenser's: a
    summary."""

    def __init__(self) -> None:
        self.replies: dict[str, int] = {}
        self.requests: list[tuple[str, dict[str, Any]]] = []  # (first user message, request)
        #: Called with each request (in the handler's thread) before it is answered.
        self.on_request: Any = None
        self.lock = threading.Lock()
        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        if not request.get("tools"):
            return _completion({"role": "assistant", "content": "Summary: thought about it."})
        first = next((_text(m) for m in request.get("messages", []) if m.get("role") == "user"), "")
        rounds = _directive(first, "rounds", 2)
        with self.lock:
            served = self.replies.get(first, 0)
            self.replies[first] = served + 1
            self.requests.append((first, request))
        if self.on_request is not None:
            self.on_request(first, request)
        if served == _directive(first, "sleep_at", -1):
            # A batch whose second call runs for a minute: a server killed meanwhile dies in
            # the middle of a tool batch (the first call's result stored, the second's not).
            calls = [
                _call("think", {"thought": f"step {served} before the long call"}),
                _call("terminal", {"command": "sleep 60"}),
            ]
        elif served < rounds:
            calls = [_call("think", {"thought": f"step {served} part {i}"}) for i in range(2)]
        else:
            calls = [_call("finish", {"message": "done"})]
        return _completion({"role": "assistant", "content": None, "tool_calls": calls})

    def settings(self) -> dict[str, Any]:
        """The agent's LLM settings that send its requests here."""
        return {
            "usage_id": "agent",
            "model": "openai/scripted",
            "base_url": self.base_url,
            "api_key": "unused",
            "num_retries": 0,
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                body = json.dumps(llm.answer(request)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _directive(first: str, name: str, default: int) -> int:
    """``name=N`` in a conversation's first message, else ``default``."""
    return (
        int(first.split(f"{name}=", 1)[1].split(maxsplit=1)[0]) if f"{name}=" in first else default
    )


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


# --------------------------------------------------------------------------- HTTP


def http(
    method: str,
    url: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
) -> tuple[int, Any]:
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        error.close()
        try:
            return error.code, json.loads(raw)
        except ValueError:
            return error.code, raw.decode(errors="replace")


def wait_until(check: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, urllib.error.URLError) as error:
            last = error
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


# --------------------------------------------------------------------------- agent servers


@dataclass
class AgentServer:
    name: str
    port: int
    folder: Path
    key: str
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.folder / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Session-API-Key": self.key}

    def get(self, path: str) -> Any:
        status, body = http("GET", self.url + path, headers=self.headers)
        assert status == 200, (path, status, body)
        return body

    def start_conversation(
        self, llm: ScriptedLLM, rounds: int, *, condense: bool, sleep_at: int | None = None
    ) -> str:
        settings: dict[str, Any] = {"llm": llm.settings()}
        if condense:
            settings["condenser"] = {
                "condenser_kind": "llm_summarizing",
                "enabled": True,
                "max_size": 20,
                "keep_first": 2,
            }
        tag = uuid.uuid4().hex[:8]
        pause = "" if sleep_at is None else f" sleep_at={sleep_at}"
        request = {
            "agent_settings": settings,
            "workspace": {"working_dir": str(self.folder / "work")},
            "initial_message": {
                "role": "user",
                "content": [{"type": "text", "text": f"task {tag} rounds={rounds}{pause}"}],
                "run": True,
            },
        }
        status, body = http("POST", self.url + "/api/conversations", request, self.headers)
        assert status in (200, 201), (status, body)
        return uuid.UUID(str(body["id"])).hex

    def send_message(self, conversation: str, text: str) -> None:
        """A user message that runs the conversation again (the scripted LLM answers it with a
        ``finish``: the conversation's first message has used up its rounds)."""
        message = {"role": "user", "content": [{"type": "text", "text": text}], "run": True}
        path = f"/api/conversations/{conversation}/events"
        status, body = http("POST", self.url + path, message, self.headers)
        assert status in (200, 201), (status, body)

    def wait_finished(self, conversation: str, timeout: float = 120) -> None:
        """Until the conversation is finished and its log says so and has stopped growing.
        The SDK sets the status before it appends the state update that records it, so a
        log read as soon as the status reads "finished" may lack its last event."""

        def finished() -> bool:
            status = self.get(f"/api/conversations/{conversation}")["execution_status"]
            assert status not in ("error", "stuck"), (status, self.log_tail())
            return bool(status == "finished")

        wait_until(finished, timeout, f"{self.name}/{conversation} to finish")
        seen: list[int] = []

        def logged() -> bool:
            log = self.events(conversation)
            updates = [
                e
                for e in log
                if e.get("kind") == "ConversationStateUpdateEvent"
                and e.get("key") == "execution_status"
            ]
            seen.append(len(log))
            recorded = bool(updates) and updates[-1].get("value") == "finished"
            return recorded and len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]

        # The last call's stats update is posted from a worker thread and may land after the
        # end: the log must also hold still for a second.
        wait_until(
            logged, timeout, f"{self.name}/{conversation}'s log to record its end", interval=0.5
        )

    def events(self, conversation: str) -> list[dict[str, Any]]:
        """The server's log, every page of its REST search."""
        found: list[dict[str, Any]] = []
        page_id: str | None = None
        while True:
            query = f"?limit=100{'&page_id=' + page_id if page_id else ''}"
            page = self.get(f"/api/conversations/{conversation}/events/search{query}")
            found.extend(page["items"])
            page_id = page["next_page_id"]
            if page_id is None:
                return found

    def log_text(self) -> str:
        """The whole log, its wrapped lines joined."""
        return " ".join(self.log_path.read_text(errors="replace").split())

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown, no lease released."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self._end_tmux()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._end_tmux()

    def _end_tmux(self) -> None:
        """The terminal tool's tmux servers outlive their agent server (a killed one always):
        end those of this server's own tmux folder."""
        if self.process is None:
            return
        folder = Path(tempfile.gettempdir()) / f"openhands-agent-server-{self.process.pid}"
        for path in folder.glob("tmux-*/*"):
            if path.is_socket():
                subprocess.run(
                    ["tmux", "-S", str(path), "kill-server"], check=False, capture_output=True
                )
        shutil.rmtree(folder, ignore_errors=True)


def start_agent_server(
    name: str,
    folder: Path,
    ingest_url: str | None,
    *,
    start_timeout: float = 90,
    on_store: str | None = None,
    store_env: dict[str, str] | None = None,
    port: int | None = None,
    **webhook: Any,
) -> AgentServer:
    """An ``openhands-agent-server`` process (``spawn_agent_server``), answering ``/health``."""
    server = spawn_agent_server(
        name, folder, ingest_url, on_store=on_store, store_env=store_env, port=port, **webhook
    )
    try:
        wait_until(lambda: _answers(server), start_timeout, f"agent server {name}", interval=0.3)
    except AssertionError:
        server.stop()
        raise AssertionError(f"agent server {name} did not start: {server.log_tail()}") from None
    return server


def spawn_agent_server(
    name: str,
    folder: Path,
    ingest_url: str | None,
    *,
    conversations: Path | None = None,
    on_store: str | None = None,
    store_env: dict[str, str] | None = None,
    port: int | None = None,
    config: dict[str, Any] | None = None,
    **webhook: Any,
) -> AgentServer:
    """An ``openhands-agent-server`` process, not waited for. ``conversations``: its
    ``conversations_path`` (else a folder in ``folder``); ``on_store``: a store URL it keeps
    its conversations in (``--import-modules viewstore.openhands.on_store``), with
    ``store_env`` (``VIEWSTORE_IDLE_SECONDS``, ...); ``config``: more of the server's settings;
    ``lease_ttl_seconds`` from the webhook options' ``lease_ttl`` key."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "work").mkdir(exist_ok=True)
    server = AgentServer(name, port or free_port(), folder, SESSION_KEY_PREFIX + name)
    lease_ttl = webhook.pop("lease_ttl", None)
    settings: dict[str, Any] = {
        "conversations_path": str(conversations or folder / "conversations"),
        "bash_events_dir": str(folder / "bash_events"),
        "session_api_keys": [server.key],
        "webhooks": [],
        **(config or {}),
    }
    if lease_ttl is not None:
        settings["lease_ttl_seconds"] = lease_ttl
    if ingest_url is not None:
        spec = {
            "base_url": ingest_url,
            "headers": {"Authorization": f"Bearer {TOKEN}", "X-Viewstore-Source": name},
            "event_buffer_size": 3,
            "flush_delay": 0.3,
            "num_retries": 0,
            "retry_delay": 0,
        }
        settings["webhooks"] = [{**spec, **webhook}]
    config_path = folder / "agent_server_config.json"
    config_path.write_text(json.dumps(settings))
    env = {
        **os.environ,
        "OPENHANDS_AGENT_SERVER_CONFIG_PATH": str(config_path),
        "OH_SECRET_KEY": "fleet-test-secret-key-0123456789",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENHANDS_SUPPRESS_BANNER": "1",
    }
    command = [sys.executable, "-m", "openhands.agent_server", *HOST, "--port", str(server.port)]
    if on_store is not None:
        command += ["--import-modules", "viewstore.openhands.on_store"]
        env.update(VIEWSTORE_URL=on_store, VIEWSTORE_SERVER_NAME=name, **(store_env or {}))
    with server.log_path.open("ab") as log:
        server.process = subprocess.Popen(
            command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    return server


def _answers(server: AgentServer) -> bool:
    assert server.process is not None
    if server.process.poll() is not None:
        raise AssertionError(f"agent server exited: {server.log_tail()}")
    status, _ = http("GET", server.url + "/health", timeout=2)
    return status == 200


# --------------------------------------------------------------------------- the ingest


@dataclass
class Ingest:
    store_url: str
    sources_file: Path
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    extra: tuple[str, ...] = ()  # more options of `viewstore ingest`
    root: tuple[str, ...] = ()  # options of `viewstore` itself (--masking FILE)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIEWSTORE_")}
        env.update(VIEWSTORE_INGEST_TOKEN=TOKEN, VIEWSTORE_INGEST_SOURCES=str(self.sources_file))
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    str(BIN / "viewstore"),
                    "--url",
                    self.store_url,
                    *self.root,
                    "ingest",
                    "--port",
                    f"{self.port}",
                    *self.extra,
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._answers, 30, "the ingest", interval=0.1)

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the ingest exited: {self.log_path.read_text()}")
        status, _ = http("GET", self.url + "/health", timeout=2)
        return status == 200

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def post(self, path: str, body: Any, source: str, token: str = TOKEN) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}", "X-Viewstore-Source": source}
        return http("POST", self.url + path, body, headers)


def write_sources(path: Path, servers: list[AgentServer]) -> None:
    lines = []
    for server in servers:
        lines += [f"[sources.{server.name}]", f'url = "{server.url}"']
        lines += [f'session_api_key = "{server.key}"', ""]
    path.write_text("\n".join(lines))


@contextlib.contextmanager
def running(*things: Any) -> Iterator[None]:
    try:
        yield
    finally:
        for thing in reversed(things):
            with contextlib.suppress(Exception):
                thing.stop()


# --------------------------------------------------------------------------- checks


def stored_equals_server(store: EventStore, server: AgentServer, conversation: str) -> bool:
    try:
        stored = [e.payload for e in store.events(conversation)]
    except LookupError:
        return False
    return stored == server.events(conversation)


def assert_stored_is_a_prefix(store: EventStore, server: AgentServer, conversation: str) -> int:
    try:
        stored = [e.payload for e in store.events(conversation)]
    except LookupError:
        return 0
    assert stored == server.events(conversation)[: len(stored)]
    return len(stored)


def assert_views_equal_the_sdks(store: EventStore, server: AgentServer, conversation: str) -> None:
    """The stored live view is the SDK's View built event by event from the server's log, and
    the resume view its ``View.from_events``."""
    import openhands.tools  # noqa: PLC0415 - registers the tool kinds for parsing
    import openhands.tools.browser_use  # noqa: F401, PLC0415 - and the browser tools
    from openhands.sdk.context.view import View  # noqa: PLC0415
    from openhands.sdk.event import Event  # noqa: PLC0415

    events = [Event.model_validate(item) for item in server.events(conversation)]
    live = View()
    for event in events:
        live.append_event(event)
    assert store.view(conversation).event_ids == [e.id for e in live.events]
    resumed = View.from_events(events)
    assert store.resume_view(conversation).event_ids == [e.id for e in resumed.events]
