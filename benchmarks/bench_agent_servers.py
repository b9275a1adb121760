"""``openhands-agent-server`` on the store against the same server on its disk, every figure a
ratio of two measures taken in one run, on one machine, with one scripted LLM
(docs/agent-servers.md). Needs ``openhands-agent-server`` (``.venv-agent-server``).

    .venv-agent-server/bin/python -m benchmarks.bench_agent_servers [--postgres-url URL] \\
        --output F [--quick]

SQLite always; PostgreSQL too with ``--postgres-url`` (a scratch database on that server). The
servers are real processes (tests/ingest/_fleet.py's scripted OpenAI-compatible LLM); "on the
store" is ``--import-modules viewstore.openhands.on_store``, "on disk" the unmodified server
(both with VSCode and the browser's preload off: neither is on this machine).

1. Per agent step (goal: store <= 1.2x disk). One scripted conversation of ``--rounds`` steps
   (two parallel ``think`` calls each, then a ``finish``), without and with the LLM-summarising
   condenser, on a disk-backed and a store-backed server; seconds from the POST that creates
   it to the status ``finished`` (polled every 50 ms), divided by its agent LLM requests
   (steps); also the mean gap between its first and last LLM request, which no polling
   touches. ``--repeat`` runs per side, the sides interleaved (alternating which goes first)
   to cancel drift; medians.
2. Server start and the first listing with N stored conversations (``--listing-sizes``):
   from process start to ``/health`` answering, then the first
   ``GET /api/conversations/search?limit=100`` and ``GET /api/conversations/count`` (goal on
   the store: flat in N, and <= 1 s for the two at 100,000), the process's RSS after them
   (``VmRSS``), and the same page asked again (composed once, cached after). On disk,
   ``conversations_path`` holds N conversation folders (``meta.json``, ``base_state.json``:
   one real conversation's files, copied with new ids); the store holds N
   ``server_conversations`` rows with their base states (one real conversation's rows, copied
   with new ids: a benchmark's bulk seeding, see ``seed_store``). A disk-backed server that
   has not answered after 5 minutes is stopped and the larger sizes are not tried on disk
   (the output says so).
3. Takeover of a conversation of about ``--takeover-events`` events (a real short run, then
   real SDK events appended: ``think`` batches, condensations keeping the view a few hundred
   long). A store-backed server resumes it and holds it, and is SIGKILLed; the benchmark then
   ends the dead holder's lease at once (the lease's expiry is not measured), and the clock
   runs from the moment the lease has expired to the first LLM request another, running,
   store-backed server makes for the conversation after a new message. Against it: the same
   conversation (the dead holder's log, base state and meta, as files in the disk server's
   layout) copied into a fresh disk-backed server's ``conversations_path`` and the server
   started (copy, start to ``/health``), then the same message to its first LLM request (the
   server warmed up first by one short conversation, as the store-backed one is by part 1).
   Both first requests must carry the conversation's last stored tool call and the same tool
   calls and results: they really resumed it, and to the same view. The disk restore is
   measured once, on the first backend's conversation; the others' are built alike (their
   requests carry as many messages, calls and results).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

import openhands.agent_server  # this benchmark needs the agent server: ImportError without
import openhands.tools  # registers the tool kinds a system prompt event names
import openhands.tools.browser_use  # noqa: F401 - and the browser's, when the server offers them
from openhands.sdk.context.view import View
from openhands.sdk.event import (
    ActionEvent,
    Condensation,
    ConversationStateUpdateEvent,
    Event,
    MessageEvent,
    ObservationEvent,
)
from openhands.sdk.llm import Message, TextContent
from openhands.sdk.tool.builtins import ThinkAction
from sqlalchemy import insert, text, update

from benchmarks.__main__ import scratch_postgres
from tests.ingest._fleet import AgentServer, ScriptedLLM, http, spawn_agent_server
from viewstore import EventStore
from viewstore.openhands import ViewstoreFileStore
from viewstore.openhands.server_internals import server_version
from viewstore.store.database.schema import base_states, server_conversations
from viewstore.store.read.reads import comparable

START_TIMEOUT = 300.0  # a server no figure is taken from, on a loaded machine
DISK_START_LIMIT = 300.0  # a disk-backed server slower than this to answer is given up
RUN_TIMEOUT = 600.0
POLL = 0.05
BASE_STATE = "base_state.json"
#: The condenser of part 1's condensed shape (tests/ingest/_fleet.py's).
SMALL_CONDENSER = {"condenser_kind": "llm_summarizing", "max_size": 20, "keep_first": 2}
#: Part 3's conversations: a condenser whose view limit the built log stays under, so the
#: first LLM request after a resume is the agent's own, not a condensation.
TAKEOVER_CONDENSER = {"condenser_kind": "llm_summarizing", "max_size": 240, "keep_first": 2}
CONDENSE_AT = 200  # the built log condenses when its view reaches this ...
KEEP_LAST = 100  # ... keeping the first two events and about this many of the newest
HELD_EVENTS = 8  # about what the holder's own message and run add to a built log
WORKER_ENV = {"VIEWSTORE_IDLE_SECONDS": "1"}
#: The holder keeps its conversations (and renews their leases every 15 s: a lease of 30 s
#: never lapses while it lives).
HOLDER_ENV = {"VIEWSTORE_IDLE_SECONDS": "3600"}
HOLDER_LEASE_TTL = 30.0


_BEGAN = [time.perf_counter()]


def progress(line: str) -> None:
    print(f"  [{time.perf_counter() - _BEGAN[0]:7.1f} s] {line}", flush=True)


# --------------------------------------------------------------------------- the LLM


class TimedLLM(ScriptedLLM):
    """The fleet tests' scripted LLM, noting when each request arrived."""

    def __init__(self) -> None:
        #: (perf_counter, the request's first user message, whether it offers tools, request)
        self.arrivals: list[tuple[float, str, bool, dict[str, Any]]] = []
        self.arrivals_lock = threading.Lock()
        super().__init__()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        arrived = time.perf_counter()
        with self.arrivals_lock:
            self.arrivals.append(
                (arrived, first_user_text(request), bool(request.get("tools")), request)
            )
        return super().answer(request)

    def mark(self) -> int:
        with self.arrivals_lock:
            return len(self.arrivals)

    def agent_requests(self, first: str, since: int) -> list[tuple[float, dict[str, Any]]]:
        """The agent's requests (with tools) of the conversation that began with ``first`` (a
        condenser's summary may follow it in the first user message)."""
        with self.arrivals_lock:
            found = self.arrivals[since:]
        return [
            (at, request)
            for at, text_, tools, request in found
            if tools and text_.startswith(first)
        ]

    def first_request(self, first: str, since: int, timeout: float) -> tuple[float, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.agent_requests(first, since)
            if found:
                return found[0]
            time.sleep(0.002)
        raise AssertionError(f"no LLM request for {first!r} within {timeout}s")


def first_user_text(request: dict[str, Any]) -> str:
    for message in request.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                parts = [str(p.get("text", "")) for p in content if isinstance(p, dict)]
                return " ".join(parts)
            return ""
    return ""


def calls_and_results(request: dict[str, Any]) -> list[str]:
    """The tool calls and results an LLM request carries, in order."""
    found = []
    for message in request.get("messages", []):
        if message.get("role") == "assistant":
            found += [f"call {call['id']}" for call in message.get("tool_calls") or []]
        elif message.get("role") == "tool":
            found.append(f"result {message['tool_call_id']}")
    return found


# --------------------------------------------------------------------------- servers


@dataclass
class Launched:
    server: AgentServer
    began: float  # perf_counter just before the process was started


def launch(
    name: str,
    folder: Path,
    *,
    conversations: Path | None = None,
    on_store: str | None = None,
    env: dict[str, str] | None = None,
    lease_ttl: float | None = None,
) -> Launched:
    """An ``openhands-agent-server`` process as tests/ingest/_fleet.py spawns one
    (``conversations``: its ``conversations_path``), but with VSCode and the browser's
    preload off; not waited for: ``answering`` times its start."""
    began = time.perf_counter()
    server = spawn_agent_server(
        name,
        folder,
        None,
        conversations=conversations,
        on_store=on_store,
        store_env=env,
        # Neither is on this machine: each would fail after seconds at every start, the
        # same on either side, and no conversation here uses them.
        config={"enable_vscode": False, "preload_tools": False},
        **({} if lease_ttl is None else {"lease_ttl": lease_ttl}),
    )
    return Launched(server, began)


def answering(launched: Launched, timeout: float) -> float | None:
    """Seconds from the process's start to ``/health`` answering 200 (None: not in time)."""
    server = launched.server
    assert server.process is not None
    deadline = launched.began + timeout
    while time.perf_counter() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"agent server {server.name} exited: {server.log_tail()}")
        with contextlib.suppress(OSError):
            status, _ = http("GET", server.url + "/health", timeout=2)
            if status == 200:
                return time.perf_counter() - launched.began
        time.sleep(POLL)
    return None


def started(launched: Launched) -> AgentServer:
    if answering(launched, START_TIMEOUT) is None:
        launched.server.stop()
        raise AssertionError(f"agent server {launched.server.name} did not start in time")
    return launched.server


def rss_mb(server: AgentServer) -> float:
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise AssertionError("no VmRSS")


def start_conversation(
    server: AgentServer, llm: ScriptedLLM, rounds: int, condenser: dict[str, Any] | None
) -> tuple[str, str]:
    """A conversation of ``rounds`` steps (the scripted LLM reads ``rounds=`` in its first
    message): its id (hex) and that first message."""
    settings: dict[str, Any] = {"llm": llm.settings()}
    if condenser is not None:
        settings["condenser"] = {**condenser, "enabled": True}
    first = f"task {uuid.uuid4().hex[:8]} rounds={rounds}"
    request = {
        "agent_settings": settings,
        "workspace": {"working_dir": str(server.folder / "work")},
        "initial_message": {
            "role": "user",
            "content": [{"type": "text", "text": first}],
            "run": True,
        },
    }
    status, body = http("POST", server.url + "/api/conversations", request, server.headers)
    assert status in (200, 201), (status, body)
    return uuid.UUID(str(body["id"])).hex, first


def finished(server: AgentServer, conversation: str, timeout: float = RUN_TIMEOUT) -> float:
    """Waits for the status ``finished`` (polled every 50 ms); the perf_counter it was seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = server.get(f"/api/conversations/{conversation}")["execution_status"]
        if status == "finished":
            return time.perf_counter()
        if status in ("error", "stuck"):
            raise AssertionError(f"{server.name}/{conversation}: {status}: {server.log_tail()}")
        time.sleep(POLL)
    raise AssertionError(f"{server.name}/{conversation} did not finish in {timeout}s")


@contextlib.contextmanager
def stopping(servers: list[AgentServer]) -> Iterator[list[AgentServer]]:
    """Stops the servers at the end (side by side: each waits for its process)."""
    try:
        yield servers
    finally:
        threads = [threading.Thread(target=_stop, args=(server,)) for server in servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def _stop(server: AgentServer) -> None:
    with contextlib.suppress(Exception):
        server.stop()


def reap(scratch: Path) -> None:
    """Kills what the servers left running in the scratch folder, by process id: the terminal
    tool's tmux sessions of a SIGKILLed server (they outlive it, named by their working
    folder, which is in the scratch folder of this run alone)."""
    mine = str(scratch)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if mine in (entry / "cmdline").read_bytes().decode(errors="replace"):
                os.kill(int(entry.name), signal.SIGKILL)


# --------------------------------------------------------------------------- 1. per step


SHAPES: dict[str, dict[str, Any] | None] = {"plain": None, "condensed": SMALL_CONDENSER}


def run_once(
    server: AgentServer, llm: TimedLLM, rounds: int, condenser: dict[str, Any] | None
) -> tuple[float, float | None, int]:
    """One conversation from POST to finished: seconds per step, the mean gap between its
    LLM requests, and its steps (agent LLM requests)."""
    since = llm.mark()
    began = time.perf_counter()
    conversation, first = start_conversation(server, llm, rounds, condenser)
    done = finished(server, conversation)
    times = [at for at, _ in llm.agent_requests(first, since)]
    steps = len(times)
    # The scripted LLM counts a conversation's replies by its first user message, which a
    # condensation's summary may extend: a condensed run can take more steps than asked.
    assert steps >= rounds + 1, (steps, rounds)
    gap = (times[-1] - times[0]) / (steps - 1) if steps > 1 else None
    return (done - began) / steps, gap, steps


def per_step(
    disk: AgentServer, store: AgentServer, llm: TimedLLM, rounds: int, repeat: int
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    samples: dict[str, dict[str, list[float]]] = {
        shape: {"disk": [], "store": [], "disk_gap": [], "store_gap": []} for shape in SHAPES
    }
    steps: dict[str, list[int]] = {shape: [] for shape in SHAPES}
    for index in range(repeat):
        sides = [("disk", disk), ("store", store)]
        for shape, condenser in SHAPES.items():
            for side, server in sides if index % 2 == 0 else sides[::-1]:
                seconds, gap, taken = run_once(server, llm, rounds, condenser)
                steps[shape].append(taken)
                samples[shape][side].append(seconds)
                if gap is not None:
                    samples[shape][f"{side}_gap"].append(gap)
    for shape, found in samples.items():
        disk_s, store_s = statistics.median(found["disk"]), statistics.median(found["store"])
        figures: dict[str, Any] = {
            "steps": steps[shape],  # of each run, disk's and store's interleaved
            "runs": repeat,
            "disk_s_per_step": round(disk_s, 4),
            "store_s_per_step": round(store_s, 4),
            "ratio": round(store_s / disk_s, 3),
            "disk_samples": [round(s, 4) for s in found["disk"]],
            "store_samples": [round(s, 4) for s in found["store"]],
        }
        if found["disk_gap"] and found["store_gap"]:
            disk_gap = statistics.median(found["disk_gap"])
            store_gap = statistics.median(found["store_gap"])
            figures.update(
                disk_s_between_requests=round(disk_gap, 4),
                store_s_between_requests=round(store_gap, 4),
                between_requests_ratio=round(store_gap / disk_gap, 3),
            )
        results[shape] = figures
    return results


# --------------------------------------------------------------------------- 2. listing


@dataclass
class Template:
    """One real conversation's server files: ``meta.json`` and ``base_state.json`` as texts."""

    conversation: str  # hex
    meta: str
    base_state: str
    persistence_dir: str | None  # as in base_state.json (the disk server's folder of it)

    def copy(self, new: uuid.UUID, created: datetime, folder: Path | None) -> tuple[str, str]:
        """The texts with a new id and creation time (and the folder a disk server keeps it
        in): what the server writes for another conversation, edited as text."""
        stored = json.loads(self.meta)
        meta = (
            self.meta.replace(self.conversation, new.hex)
            .replace(f'"created_at":"{stored["created_at"]}"', f'"created_at":"{_stamp(created)}"')
            .replace(
                f'"updated_at":"{stored["updated_at"]}"',
                f'"updated_at":"{_stamp(created + timedelta(seconds=1))}"',
            )
        )
        state = self.base_state.replace(str(uuid.UUID(self.conversation)), str(new))
        if self.persistence_dir is not None and folder is not None:
            state = state.replace(json.dumps(self.persistence_dir), json.dumps(str(folder)))
        return meta, state


def _stamp(at: datetime) -> str:
    """A time as the server writes it in ``meta.json``."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _created(index: int) -> datetime:
    """The seeded conversations' creation times: a second apart, a year back."""
    return datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=index)


def disk_template(server: AgentServer, conversation: str) -> Template:
    path = server.folder / "conversations" / conversation
    meta = (path / "meta.json").read_text()
    state = (path / BASE_STATE).read_text()
    return Template(conversation, meta, state, json.loads(state).get("persistence_dir"))


def store_template(store: EventStore, conversation: str) -> Template:
    row = store.server_conversation(conversation)
    assert row is not None and row.meta is not None
    # What the server reads of it: a stored base state trailing the log is caught up on read.
    state = ViewstoreFileStore(store, conversation).read(BASE_STATE)
    return Template(conversation, row.meta, state, json.loads(state).get("persistence_dir"))


def seed_disk(template: Template, conversations: Path, start: int, stop: int) -> None:
    """Conversation folders ``start`` .. ``stop`` - 1: ``meta.json`` and ``base_state.json``
    as the disk-backed server writes them (the template's, with a new id)."""
    conversations.mkdir(parents=True, exist_ok=True)
    for index in range(start, stop):
        new = uuid.uuid4()
        folder = conversations / new.hex
        meta, state = template.copy(new, _created(index), folder)
        folder.mkdir()
        (folder / "meta.json").write_text(meta)
        (folder / BASE_STATE).write_text(state)


def seed_store(store: EventStore, template: Template, start: int, stop: int) -> None:
    """Rows ``start`` .. ``stop`` - 1 of ``server_conversations`` and ``base_states``: the
    template's rows with new ids, inserted a few thousand per transaction. A benchmark's bulk
    seeding, not how a server writes (it claims a lease and appends events first): no events,
    no lease, the base state at version 0."""
    chunk = 5000
    for first in range(start, stop, chunk):
        rows, states = [], []
        with store.begin() as conn:
            for index in range(first, min(stop, first + chunk)):
                new = uuid.uuid4()
                meta, state = template.copy(new, _created(index), None)
                created = comparable(conn, _created(index))
                rows.append(
                    {
                        "conversation_id": new.hex,
                        "meta": meta,
                        "created_at": created,
                        "updated_at": created + timedelta(seconds=1),
                        "runner": None,
                        "generation": 0,
                        "lease_expires_at": None,
                    }
                )
                states.append(
                    {
                        "conversation_id": new.hex,
                        "revision": 1,
                        "at_version": 0,
                        "payload": state,
                        "updated_at": created,
                    }
                )
            conn.execute(insert(server_conversations), rows)
            conn.execute(insert(base_states), states)
    if store.engine.dialect.name == "postgresql":
        # The statistics autovacuum gathers within a minute of such a load.
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE server_conversations"))
            conn.execute(text("ANALYZE base_states"))


def first_listing(launched: Launched, size: int, limit: float) -> dict[str, Any] | None:
    """Start to ``/health``, the first search and count, RSS after; None if the server did not
    answer within ``limit`` seconds."""
    start_s = answering(launched, limit)
    if start_s is None:
        return None
    server = launched.server
    began = time.perf_counter()
    page = _get(server, "/api/conversations/search?limit=100")
    search_s = time.perf_counter() - began
    began = time.perf_counter()
    count = _get(server, "/api/conversations/count")
    count_s = time.perf_counter() - began
    rss = rss_mb(server)
    began = time.perf_counter()  # the same page again: what a listing costs once composed
    _get(server, "/api/conversations/search?limit=100")
    again_s = time.perf_counter() - began
    return {
        "conversations": size,
        "start_s": round(start_s, 3),
        "search_s": round(search_s, 4),
        "count_s": round(count_s, 4),
        "serve_s": round(search_s + count_s, 4),
        "total_s": round(start_s + search_s + count_s, 3),
        "rss_mb": rss,
        "search_again_s": round(again_s, 4),
        "listed": len(page["items"]),
        "count": count,
    }


def _get(server: AgentServer, path: str) -> Any:
    status, body = http("GET", server.url + path, headers=server.headers, timeout=START_TIMEOUT)
    assert status == 200, (path, status, body)
    return body


def listing_on_disk(
    template: Template, sizes: list[int], scratch: Path
) -> tuple[dict[str, Any], str | None]:
    conversations = scratch / "disk-listing" / "conversations"
    found: dict[str, Any] = {}
    made = 0
    for size in sizes:
        began = time.perf_counter()
        seed_disk(template, conversations, made, size)
        made = size
        seeding = time.perf_counter() - began
        launched = launch(f"disk-{size}", scratch / f"disk-{size}", conversations=conversations)
        with stopping([launched.server]):
            figures = first_listing(launched, size, DISK_START_LIMIT)
        if figures is None:
            note = (
                f"the disk-backed server with {size:,} conversations did not answer within "
                f"{DISK_START_LIMIT:.0f} s: stopped; measured at "
                f"{', '.join(f'{s:,}' for s in found) or 'no size'} only"
            )
            return found, note
        found[str(size)] = {**figures, "seeding_s": round(seeding, 1)}
        progress(f"disk, {size:,} conversations: {_listing_line(figures)}")
    return found, None


def listing_on_store(
    store: EventStore,
    url: str,
    template: Template,
    *,
    sizes: list[int],
    scratch: Path,
    backend: str,
) -> tuple[dict[str, Any], AgentServer]:
    """The figures, and the server started at the first size, kept running (part 3's
    holder: its environment is the holder's)."""
    found: dict[str, Any] = {}
    holder: AgentServer | None = None
    made = store.count_server_conversations()
    try:
        for index, size in enumerate(sizes):
            began = time.perf_counter()
            seed_store(store, template, made, size)
            made = max(made, size)
            seeding = time.perf_counter() - began
            launched = launch(
                f"{backend}-{size}",
                scratch / f"{backend}-{size}",
                on_store=url,
                env=HOLDER_ENV if index == 0 else WORKER_ENV,
                lease_ttl=HOLDER_LEASE_TTL if index == 0 else None,
            )
            try:
                figures = first_listing(launched, size, START_TIMEOUT)
            finally:
                if index:
                    launched.server.stop()
            if figures is None:
                raise AssertionError(f"{launched.server.name} did not start in time")
            if index == 0:
                holder = launched.server
            found[str(size)] = {**figures, "seeding_s": round(seeding, 1)}
            progress(f"{backend}, {size:,} conversations: {_listing_line(figures)}")
    except BaseException:
        if holder is not None:
            holder.stop()
        raise
    assert holder is not None
    return found, holder


def _listing_line(figures: dict[str, Any]) -> str:
    return (
        f"start to /health {figures['start_s']:.2f} s, first search {figures['search_s']:.3f} s"
        f" + count {figures['count_s']:.3f} s, RSS {figures['rss_mb']:.0f} MB "
        f"({figures['listed']} listed of {figures['count']}); the page again "
        f"{figures['search_again_s']:.3f} s"
    )


# --------------------------------------------------------------------------- 3. takeover


def _step(head: str, number: int, template: dict[str, Any]) -> list[Event]:
    """One agent step as the SDK logs it: the LLM's statistics, a batch of two ``think``
    calls, their two results; each copied from the real run's events with new ids."""
    stats: Event = template["stats"].model_copy(
        update={"id": str(uuid.uuid4()), "parent_id": head, "timestamp": _now()}
    )
    response = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    actions: list[Event] = []
    parent = head
    for part, action in enumerate(template["actions"]):
        thought = f"step {number} part {part}"
        arguments = json.dumps({"thought": thought})
        call = f"call_{uuid.uuid4().hex[:12]}"
        actions.append(
            action.model_copy(
                update={
                    "id": str(uuid.uuid4()),
                    "timestamp": _now(),
                    "parent_id": parent,
                    "action": ThinkAction(thought=thought),
                    "tool_call_id": call,
                    "tool_call": action.tool_call.model_copy(
                        update={"id": call, "arguments": arguments}
                    ),
                    "llm_response_id": response,
                    "summary": f"think: {arguments}",
                }
            )
        )
        parent = actions[-1].id
    results: list[Event] = []
    for action, result in zip(actions, template["results"], strict=True):
        assert isinstance(action, ActionEvent)
        results.append(
            result.model_copy(
                update={
                    "id": str(uuid.uuid4()),
                    "timestamp": _now(),
                    "parent_id": parent,
                    "tool_call_id": action.tool_call_id,
                    "action_id": action.id,
                }
            )
        )
        parent = results[-1].id
    return [stats, *actions, *results]


def _now() -> str:
    return datetime.now().isoformat()  # as the SDK stamps its events: local time, no zone


def _step_template(events: list[Event]) -> dict[str, Any]:
    actions = [e for e in events if isinstance(e, ActionEvent) and e.tool_name == "think"][:2]
    ids = {a.id for a in actions}
    results = [e for e in events if isinstance(e, ObservationEvent) and e.action_id in ids]
    stats = [e for e in events if isinstance(e, ConversationStateUpdateEvent) and e.key == "stats"]
    assert len(actions) == 2 and len(results) == 2 and stats, "the real run has no think batch"
    return {"actions": actions, "results": results, "stats": stats[-1]}


def build_log(store: EventStore, conversation: str, target: int) -> str:
    """Appends real SDK events to a short real conversation until its log holds about
    ``target`` events: a user message, then steps (``_step``), condensed as the
    LLM-summarising condenser does (forgetting all but the first two events and about the
    newest ``KEEP_LAST``, cut where a tool batch starts) whenever the view reaches
    ``CONDENSE_AT``. The events are appended in batches, as ``viewstore import`` does, in the
    SDK's own JSON; the base state's HEAD is moved to the last. Returns the last tool call's
    id."""
    stored = store.events(conversation)
    events = [Event.model_validate_json(e.payload_json) for e in stored]
    view = View()
    for event in events:
        view.append_event(event)
    file_store = ViewstoreFileStore(store, conversation)
    state = json.loads(file_store.read(BASE_STATE))
    head = state["leaf_event_id"]
    template = _step_template(events)
    added: list[Event] = []

    def add(event: Event) -> None:
        nonlocal head
        added.append(event)
        view.append_event(event)
        if not isinstance(event, ConversationStateUpdateEvent):
            head = event.id

    message = MessageEvent(
        source="user",
        llm_message=Message(role="user", content=[TextContent(text="think it all through")]),
        parent_id=head,
    )
    add(message)
    add(ConversationStateUpdateEvent(key="last_user_message_id", value=message.id, parent_id=head))
    number = 0
    while len(events) + len(added) + 5 + HELD_EVENTS <= target:
        if len(view.events) >= CONDENSE_AT:
            add(_condensation(view, head))
        for event in _step(head, number, template):
            add(event)
        number += 1
    texts = [event.model_dump_json(exclude_none=True) for event in added]
    for start in range(0, len(texts), 500):
        store.append(conversation, texts[start : start + 500], expected_version=len(events) + start)
    state["leaf_event_id"] = head
    state["last_user_message_id"] = message.id
    store.save_base_state(
        conversation,
        json.dumps(state, separators=(",", ":"), ensure_ascii=False),
        at_version=len(events) + len(added),
    )
    last = [e for e in added if isinstance(e, ActionEvent)]
    return last[-1].tool_call_id


def _condensation(view: View, head: str) -> Condensation:
    shown = list(view.events)
    cut = max(2, len(shown) - KEEP_LAST)
    while cut < len(shown) and not (
        isinstance(shown[cut], ActionEvent) and not isinstance(shown[cut - 1], ActionEvent)
    ):
        cut += 1
    return Condensation(
        forgotten_event_ids={e.id for e in shown[2:cut]},
        summary="Summary: thought about it.",
        summary_offset=2,
        llm_response_id=f"chatcmpl-{uuid.uuid4().hex[:12]}",
        parent_id=head,
    )


def export_folder(store: EventStore, conversation: str, folder: Path, lives_in: Path) -> None:
    """The conversation as the disk-backed server keeps it, in ``folder``: its events as the
    SDK's event files (the stored text is the SDK's own), ``base_state.json`` (what the
    store-backed server reads: caught up to the log) naming ``lives_in`` as its folder, and
    ``meta.json`` (the server's, as stored)."""
    events = folder / "events"
    events.mkdir(parents=True)
    for event in store.events(conversation):
        name = f"event-{event.seq - 1:05d}-{event.event_id}.json"
        (events / name).write_text(event.payload_json)
    state = json.loads(ViewstoreFileStore(store, conversation).read(BASE_STATE))
    state["persistence_dir"] = str(lives_in)
    (folder / BASE_STATE).write_text(json.dumps(state, separators=(",", ":"), ensure_ascii=False))
    row = store.server_conversation(conversation)
    assert row is not None and row.meta is not None
    (folder / "meta.json").write_text(row.meta)


@dataclass
class Built:
    size: int
    conversation: str
    first: str
    last_call: str
    events: int = 0
    generation: int = 0


def takeover(
    store: EventStore,
    worker: AgentServer,
    holder: AgentServer,
    llm: TimedLLM,
    *,
    sizes: list[int],
    export_to: Path | None,
) -> tuple[dict[str, Any], list[Built]]:
    """Part 3 on one store; ``export_to``: also write each conversation, as the holder left
    it, in the disk server's layout there (one folder per size)."""
    built: list[Built] = []
    for size in sizes:
        conversation, first = start_conversation(worker, llm, 2, TAKEOVER_CONDENSER)
        finished(worker, conversation)
        built.append(Built(size, conversation, first, ""))
    for item in built:  # the worker lets them go when idle (WORKER_ENV)
        _wait(lambda item=item: _runner(store, item.conversation) is None, "the worker to let go")
        item.last_call = build_log(store, item.conversation, item.size)
    for item in built:
        holder.send_message(item.conversation, "hold it")
        finished(holder, item.conversation)
    for item in built:
        row = store.server_conversation(item.conversation)
        assert row is not None and row.runner is not None and row.runner.startswith(holder.name)
        item.generation = row.generation
        item.events = store.version(item.conversation)
    holder.kill()
    if export_to is not None:
        for item in built:
            export_folder(
                store,
                item.conversation,
                export_to / str(item.size) / item.conversation,
                export_to / "restored" / str(item.size) / "conversations" / item.conversation,
            )
    found: dict[str, Any] = {}
    for item in built:
        _end_lease(store, item.conversation)
        _wait(lambda item=item: _expired(store, item.conversation), "the lease to expire")
        since = llm.mark()
        began = time.perf_counter()
        worker.send_message(item.conversation, "go on")
        posted = time.perf_counter()
        arrived, request = llm.first_request(item.first, since, RUN_TIMEOUT)
        finished(worker, item.conversation)
        row = store.server_conversation(item.conversation)
        assert row is not None
        sent = calls_and_results(request)
        found[str(item.size)] = {
            "events": item.events,
            "seconds": round(arrived - began, 4),
            "post_s": round(posted - began, 4),
            "taken_over": bool(
                row.generation == item.generation + 1
                and row.runner is not None
                and row.runner.startswith(worker.name)
            ),
            "llm_request": True,
            "request_carries_last_call": f"call {item.last_call}" in sent,
            "request_carries_message": "go on" in json.dumps(request["messages"][-1]),
            "request_messages": len(request["messages"]),
            "request_calls_and_results": len(sent),
            "calls_and_results": sent,
        }
        progress(
            f"takeover, {item.events:,} events: lease free to first LLM request "
            f"{arrived - began:.3f} s"
        )
    return found, built


def restore_on_disk(llm: TimedLLM, exported: Path, built: list[Built]) -> dict[str, Any]:
    """Each exported conversation copied into a fresh disk-backed server's
    ``conversations_path``, the server started, warmed up, and sent the message."""
    found: dict[str, Any] = {}
    for item in built:
        root = exported / "restored" / str(item.size)
        target = root / "conversations" / item.conversation
        began = time.perf_counter()
        shutil.copytree(exported / str(item.size) / item.conversation, target)
        copy_s = time.perf_counter() - began
        launched = launch(f"restore-{item.size}", root)
        with stopping([launched.server]) as (server,):
            start_s = answering(launched, START_TIMEOUT)
            assert start_s is not None, f"{server.name} did not start"
            warm, _ = start_conversation(server, llm, 0, None)
            finished(server, warm)
            since = llm.mark()
            posted_at = time.perf_counter()
            server.send_message(item.conversation, "go on")
            posted = time.perf_counter()
            arrived, request = llm.first_request(item.first, since, RUN_TIMEOUT)
            finished(server, item.conversation)
        sent = calls_and_results(request)
        resume_s = arrived - posted_at
        found[str(item.size)] = {
            "events": item.events,
            "copy_s": round(copy_s, 4),
            "start_s": round(start_s, 3),
            "resume_s": round(resume_s, 4),
            "post_s": round(posted - posted_at, 4),
            "restore_s": round(copy_s + start_s + resume_s, 3),
            "llm_request": True,
            "request_carries_last_call": f"call {item.last_call}" in sent,
            "request_messages": len(request["messages"]),
            "request_calls_and_results": len(sent),
            "calls_and_results": sent,
        }
        progress(
            f"disk restore, {item.events:,} events: copy {copy_s:.3f} s, start "
            f"{start_s:.2f} s, message to first LLM request {resume_s:.3f} s"
        )
    return found


def _runner(store: EventStore, conversation: str) -> str | None:
    row = store.server_conversation(conversation)
    assert row is not None
    return row.runner


def _end_lease(store: EventStore, conversation: str) -> None:
    """The dead holder's lease ends now instead of at its expiry (the wait is no part of a
    takeover's cost): its expiry is moved to a second ago, the holder still named in it, so
    the next claim takes the conversation over as it would after the expiry."""
    with store.begin() as conn:
        conn.execute(
            update(server_conversations)
            .where(server_conversations.c.conversation_id == conversation)
            .values(lease_expires_at=comparable(conn, datetime.now(UTC) - timedelta(seconds=1)))
        )


def _expired(store: EventStore, conversation: str) -> bool:
    row = store.server_conversation(conversation)
    assert row is not None
    return row.lease_expires_at is not None and row.lease_expires_at < datetime.now(UTC)


def _wait(check: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(POLL)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


# --------------------------------------------------------------------------- the run


def measure(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    results: dict[str, Any] = {
        "agent_server": server_version(),
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "repeat": args.repeat,
        "listing_sizes": args.listing_sizes,
        "takeover_events": args.takeover_events,
        "steps": {},
        "listing": {},
        "takeover": {},
    }
    llm = TimedLLM()
    with contextlib.ExitStack() as stack:
        stack.callback(llm.close)
        backends = {"sqlite": f"sqlite:///{scratch / 'store.db'}"}
        if args.postgres_url:
            backends["postgresql"] = stack.enter_context(scratch_postgres(args.postgres_url))
        stores = {}
        for backend, url in backends.items():
            stores[backend] = stack.enter_context(EventStore(url))
            stores[backend].create_schema()
        # The servers no figure of start-up is taken from, started side by side.
        launches = [launch("disk", scratch / "disk")] + [
            launch(f"W-{backend}", scratch / f"W-{backend}", on_store=url, env=WORKER_ENV)
            for backend, url in backends.items()
        ]
        running = stack.enter_context(stopping([x.server for x in launches]))
        for launched in launches:
            started(launched)
        disk, workers = running[0], dict(zip(backends, running[1:], strict=True))
        progress(f"{len(launches)} servers started")
        conversation, _ = start_conversation(disk, llm, 2, None)
        finished(disk, conversation)
        time.sleep(0.5)  # the title, written after the run
        listing, note = listing_on_disk(
            disk_template(disk, conversation), args.listing_sizes, scratch
        )
        results["listing"]["disk"] = listing
        results["listing"]["disk_note"] = note
        exported = scratch / "exported"
        for backend, url in backends.items():
            store, worker = stores[backend], workers[backend]
            # One real conversation: the seeding's template, and the worker's first run (the
            # disk server's was the disk template's): part 1 times neither's first.
            conversation, _ = start_conversation(worker, llm, 2, None)
            finished(worker, conversation)
            time.sleep(0.5)
            template = store_template(store, conversation)
            steps = results["steps"][backend] = per_step(
                disk, worker, llm, args.rounds, args.repeat
            )
            for shape, figures in steps.items():
                progress(f"{backend}, {shape}, per step: {_step_line(figures)}")
            found, holder = listing_on_store(
                store, url, template, sizes=args.listing_sizes, scratch=scratch, backend=backend
            )
            results["listing"][backend] = found
            with stopping([holder]):
                first = backend == "sqlite"
                results["takeover"][backend], built = takeover(
                    store,
                    worker,
                    holder,
                    llm,
                    sizes=args.takeover_events,
                    export_to=exported if first else None,
                )
            if first:
                results["takeover"]["disk"] = restore_on_disk(llm, exported, built)
        results["listing"]["ratios"] = _listing_ratios(results["listing"], list(backends))
        results["takeover"]["ratios"] = _takeover_ratios(results["takeover"], list(backends))
        for sizes in results["takeover"].values():  # compared: too long to keep
            for figures in sizes.values():
                figures.pop("calls_and_results", None)
    return results


LISTING_RATIOS = ("start_s", "serve_s", "total_s", "rss_mb", "search_again_s")


def _listing_ratios(listing: dict[str, Any], backends: list[str]) -> dict[str, Any]:
    ratios: dict[str, Any] = {}
    disk = listing["disk"]
    for backend in backends:
        ours = listing[backend]
        mine: dict[str, Any] = {}
        for size, figures in ours.items():
            if size in disk:
                other = disk[size]
                mine[size] = {key: round(figures[key] / other[key], 3) for key in LISTING_RATIOS}
        sizes = list(ours)
        mine["store_largest_over_smallest"] = {
            key: round(ours[sizes[-1]][key] / ours[sizes[0]][key], 3) for key in LISTING_RATIOS
        }
        ratios[backend] = mine
    return ratios


def _takeover_ratios(takeover_: dict[str, Any], backends: list[str]) -> dict[str, Any]:
    """Each takeover over the disk server's restore of the first backend's conversation; the
    first backend's request must carry exactly the tool calls and results the disk server's
    did (the same conversation), the others' as many (a conversation built alike)."""
    ratios: dict[str, Any] = {}
    disk = takeover_["disk"]
    for index, backend in enumerate(backends):
        ratios[backend] = {}
        for size, figures in takeover_[backend].items():
            other = disk[size]
            mine = ratios[backend][size] = {
                "over_disk_resume": round(figures["seconds"] / other["resume_s"], 3),
                "over_disk_restore": round(figures["seconds"] / other["restore_s"], 4),
                "same_shape_as_disk": (
                    figures["request_messages"] == other["request_messages"]
                    and figures["request_calls_and_results"] == other["request_calls_and_results"]
                ),
            }
            if index == 0:
                same = figures["calls_and_results"] == other["calls_and_results"]
                mine["same_calls_and_results_as_disk"] = same
    return ratios


def _step_line(figures: dict[str, Any]) -> str:
    line = (
        f"disk {figures['disk_s_per_step'] * 1e3:.1f} ms/step, store "
        f"{figures['store_s_per_step'] * 1e3:.1f} ms/step: {figures['ratio']:.2f}x (goal <= 1.2)"
    )
    if "between_requests_ratio" in figures:
        line += (
            f"; between LLM requests {figures['disk_s_between_requests'] * 1e3:.1f} vs "
            f"{figures['store_s_between_requests'] * 1e3:.1f} ms: "
            f"{figures['between_requests_ratio']:.2f}x"
        )
    return line


def report(results: dict[str, Any]) -> str:
    lines = [
        f"agent servers (openhands-agent-server {results['agent_server']}) on the store vs on "
        f"disk, {results['cpus']} CPUs"
    ]
    for backend, shapes in results["steps"].items():
        for shape, figures in shapes.items():
            lines.append(f"  per step, {backend}, {shape}: {_step_line(figures)}")
    listing = results["listing"]
    for side in ("disk", *results["steps"]):
        for size, figures in listing[side].items():
            lines.append(f"  listing, {side}, {int(size):,}: {_listing_line(figures)}")
    if listing["disk_note"]:
        lines.append(f"  listing, disk: {listing['disk_note']}")
    for backend, ratios in listing["ratios"].items():
        for size, figures in ratios.items():
            shown = ", ".join(f"{key} {value}x" for key, value in figures.items())
            lines.append(f"  listing, {backend} over disk, {size}: {shown}")
        largest = listing[backend][str(results["listing_sizes"][-1])]
        lines.append(
            f"  listing, {backend}, {results['listing_sizes'][-1]:,}: first search + count "
            f"{largest['serve_s']:.3f} s (goal <= 1 s)"
        )
    takeover_ = results["takeover"]
    for figures in takeover_["disk"].values():
        lines.append(
            f"  disk restore, {figures['events']:,} events: copy {figures['copy_s']:.3f} s + "
            f"start {figures['start_s']:.2f} s + message to LLM request "
            f"{figures['resume_s']:.3f} s = {figures['restore_s']:.2f} s"
        )
    for backend in results["steps"]:
        for size, figures in takeover_[backend].items():
            ratio = takeover_["ratios"][backend][size]
            lines.append(
                f"  takeover, {backend}, {figures['events']:,} events: lease free to LLM "
                f"request {figures['seconds']:.3f} s: {ratio['over_disk_resume']:.2f}x the disk "
                f"server's resume, {ratio['over_disk_restore']:.3f}x its restore; resumed "
                f"{figures['request_carries_last_call']}, same view as disk "
                f"{ratio.get('same_calls_and_results_as_disk', ratio['same_shape_as_disk'])}"
            )
    return "\n".join(lines)


def checks(results: dict[str, Any]) -> list[str]:
    """What must hold whatever the timings: each listed count is the seeded one, each
    takeover a real one whose first LLM request carried the stored conversation."""
    problems = []
    for side, sizes in results["listing"].items():
        if side in ("disk_note", "ratios"):
            continue
        for size, figures in sizes.items():
            if figures["count"] != int(size) or figures["listed"] != min(100, int(size)):
                problems.append(f"listing {side} {size}: {figures['count']}, {figures['listed']}")
    for side, sizes in results["takeover"].items():
        if side == "ratios":
            for backend, ratios in sizes.items():
                for size, figures in ratios.items():
                    if figures.get("same_calls_and_results_as_disk") is False:
                        problems.append(f"takeover {backend} {size}: not the disk's view")
            continue
        for size, figures in sizes.items():
            if not figures["request_carries_last_call"] or figures.get("taken_over") is False:
                problems.append(f"takeover {side} {size}: {figures}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("VIEWSTORE_TEST_POSTGRES_URL"),
        help="a PostgreSQL server, measured too (a scratch database on it)",
    )
    parser.add_argument("--rounds", type=int, default=20, help="steps per conversation (part 1)")
    parser.add_argument("--repeat", type=int, default=5, help="runs a side (part 1)")
    parser.add_argument("--listing-sizes", default="100,10000,100000")
    parser.add_argument("--takeover-events", default="1000,10000,20000")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test only")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.repeat = 2, 1
        args.listing_sizes, args.takeover_events = "20", "200"
    args.listing_sizes = [int(n) for n in args.listing_sizes.split(",") if n]
    args.takeover_events = [int(n) for n in args.takeover_events.split(",") if n]
    _BEGAN[0] = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-agent-servers-") as scratch:
        try:
            results = measure(args, Path(scratch))
        finally:
            reap(Path(scratch))
    problems = results["problems"] = checks(results)
    print(report(results), flush=True)
    for problem in problems:
        print(f"  PROBLEM: {problem}", flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
