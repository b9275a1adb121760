"""A realistic OpenHands conversation, appended step by step the way an agent worker would.

The events have the exact JSON shapes the OpenHands SDK (1.57) writes: a system prompt, the
user's task, a thinking batch of two parallel tool calls with their observations, an agent
message, a condensation request and the condensation that answers it (forgetting the batch and
inserting a summary), a tool call that fails with an ``AgentErrorEvent``, a retry that succeeds,
and the final answer. State updates (not LLM-visible) are interleaved as the SDK does.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from viewstore.domain.errors import ConversationNotFoundError
from viewstore.store import EventStore, StoredView

SYSTEM_PROMPT = (
    "You are OpenHands agent, a helpful AI assistant that can interact with a computer to "
    "solve tasks."
)


@dataclass
class _Clock:
    now: datetime = field(default_factory=lambda: datetime(2026, 1, 5, 9, 30, tzinfo=UTC))

    def tick(self, seconds: float = 7.0) -> str:
        self.now += timedelta(seconds=seconds)
        return self.now.replace(tzinfo=None).isoformat(timespec="microseconds")


@dataclass
class DemoConversation:
    """Builds the events one step at a time, stamping ``parent_id`` like the SDK does."""

    clock: _Clock = field(default_factory=_Clock)
    head: str | None = None
    steps: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    _response: int = 0

    def _event(self, kind: str, source: str, **fields: Any) -> dict[str, Any]:
        event: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "timestamp": self.clock.tick(),
            "source": source,
        }
        if self.head is not None:
            event["parent_id"] = self.head
        event.update(fields)
        event["kind"] = kind
        if kind != "ConversationStateUpdateEvent":  # state updates never move HEAD
            self.head = event["id"]
        return event

    def _response_id(self) -> str:
        self._response += 1
        return f"msg_01DEMO{self._response:04d}"

    def step(self, title: str, *events: dict[str, Any]) -> None:
        self.steps.append((title, list(events)))

    # -- event shapes ---------------------------------------------------------------------

    def system_prompt(self) -> dict[str, Any]:
        return self._event(
            "SystemPromptEvent",
            "agent",
            system_prompt={"cache_prompt": False, "type": "text", "text": SYSTEM_PROMPT},
            tools=[
                {
                    "description": "Execute a bash command in the terminal.",
                    "action_type": "TerminalAction",
                    "observation_type": "TerminalObservation",
                    "annotations": {
                        "readOnlyHint": False,
                        "destructiveHint": True,
                        "idempotentHint": False,
                        "openWorldHint": True,
                    },
                    "kind": "TerminalTool",
                    "title": "terminal",
                }
            ],
            dynamic_context={
                "cache_prompt": False,
                "type": "text",
                "text": "<RUNTIME_INFO>working dir: /workspace/project</RUNTIME_INFO>",
            },
        )

    def message(self, source: str, text: str) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "llm_message": {
                "role": "user" if source == "user" else "assistant",
                "content": [{"cache_prompt": False, "type": "text", "text": text}],
                "thinking_blocks": [],
            }
        }
        if source == "agent":
            fields["llm_response_id"] = self._response_id()
        fields.update(activated_skills=[], extended_content=[])
        return self._event("MessageEvent", source, **fields)

    def state_update(self, key: str, value: Any) -> dict[str, Any]:
        return self._event("ConversationStateUpdateEvent", "environment", key=key, value=value)

    def action(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        response_id: str,
        thought: str = "",
        thinking: str | None = None,
    ) -> dict[str, Any]:
        call_id = "toolu_01" + uuid.uuid4().hex[:22]
        args = json.dumps(arguments)
        return self._event(
            "ActionEvent",
            "agent",
            thought=[{"cache_prompt": False, "type": "text", "text": thought}] if thought else [],
            thinking_blocks=(
                [{"type": "thinking", "thinking": thinking, "signature": "ErUBCkYIBxgCKkDemo"}]
                if thinking
                else []
            ),
            action={"data": arguments, "kind": "MCPToolAction"},
            tool_name=tool,
            tool_call_id=call_id,
            tool_call={"id": call_id, "name": tool, "arguments": args, "origin": "completion"},
            llm_response_id=response_id,
            security_risk="LOW",
            summary=f"{tool}: {args}",
        )

    def observation(
        self, action: dict[str, Any], text: str, *, error: bool = False
    ) -> dict[str, Any]:
        tool = action["tool_name"]
        return self._event(
            "ObservationEvent",
            "environment",
            tool_name=tool,
            tool_call_id=action["tool_call_id"],
            observation={
                "content": [{"cache_prompt": False, "type": "text", "text": text}],
                "is_error": error,
                "tool_name": tool,
                "kind": "MCPToolObservation",
            },
            action_id=action["id"],
            extended_content=[],
        )

    def agent_error(self, action: dict[str, Any], error: str) -> dict[str, Any]:
        return self._event(
            "AgentErrorEvent",
            "agent",
            tool_name=action["tool_name"],
            tool_call_id=action["tool_call_id"],
            error=error,
            classification={"kind": "unknown", "retryable": False, "user_action": "none"},
        )

    def condensation_request(self) -> dict[str, Any]:
        return self._event("CondensationRequest", "environment")

    def condensation(self, forgotten: list[str], summary: str, offset: int) -> dict[str, Any]:
        return self._event(
            "Condensation",
            "environment",
            forgotten_event_ids=forgotten,
            summary=summary,
            summary_offset=offset,
            llm_response_id=self._response_id(),
        )


def build_demo() -> DemoConversation:
    """The demo conversation as a list of steps, each one append (one transaction)."""
    c = DemoConversation()
    system = c.system_prompt()
    task = c.message("user", "The CI build is red. Run the test suite and fix what fails.")
    running = c.state_update("execution_status", "running")
    c.step("system prompt, task", system, task, running)

    batch = c._response_id()
    run_tests = c.action(
        "terminal",
        {"command": "python -m pytest -q"},
        response_id=batch,
        thought="Let me run the tests and look at the loader at the same time.",
        thinking="Two independent reads: run them in parallel.",
    )
    open_file = c.action("terminal", {"command": "cat src/config.py"}, response_id=batch)
    tests_out = c.observation(
        run_tests, "FAILED tests/test_config.py::test_load - KeyError: 'timeout'\n1 failed"
    )
    file_out = c.observation(open_file, "def load_config(path):\n    return raw['timeout']")
    c.step("thinking batch: 2 parallel tool calls", run_tests, open_file)
    c.step("their observations", tests_out, file_out)

    found = c.message("agent", "`load_config` reads `timeout` without a default; fixing it.")
    c.step("agent message", found)

    request = c.condensation_request()
    c.step("condensation request (context is getting long)", request)

    summary = (
        "Ran the tests: test_config.py::test_load fails with KeyError 'timeout'. "
        "src/config.py reads raw['timeout'] without a default."
    )
    condensation = c.condensation(
        [run_tests["id"], open_file["id"], tests_out["id"], file_out["id"]], summary, 2
    )
    c.step("condensation: forget the batch, insert a summary at 2", condensation)

    fix = c.action(
        "terminal",
        {"command": "sed -i \"s/raw\\['timeout'\\]/raw.get('timeout', 30)/\" src/config.py"},
        response_id=c._response_id(),
        thought="Use a default of 30 seconds.",
    )
    c.step("a tool call ...", fix)
    c.step("... that times out", c.agent_error(fix, "Tool execution timed out after 120s."))

    retry = c.action(
        "terminal",
        {"command": "python -m pytest -q"},
        response_id=c._response_id(),
        thought="The edit went through before the timeout; re-run the tests.",
    )
    c.step("retry", retry, c.observation(retry, "42 passed in 3.10s"))
    done = c.message("agent", "Fixed: `load_config` now defaults `timeout` to 30s; all green.")
    c.step("final answer", done, c.state_update("execution_status", "finished"))
    return c


def demo_events() -> list[dict[str, Any]]:
    """All events of a fresh demo conversation, in append order."""
    return [event for _, batch in build_demo().steps for event in batch]


@dataclass(frozen=True)
class DemoResult:
    conversation_id: str
    view: StoredView
    request_seq: int  # seq of the CondensationRequest: the flag is up right after it
    steps: list[tuple[str, int]]  # (title, version after the step)
    created: bool  # False when the conversation already existed and was only shown


def run_demo(store: EventStore, conversation_id: str | None = None) -> DemoResult:
    """Create the schema and append the demo, step by step with ``expected_version``.

    A conversation id that already exists is left as it is (only its view is read back), so
    running the demo twice never fails.
    """
    store.create_schema()
    key = conversation_id or uuid.uuid4().hex
    try:
        store.version(key)
    except ConversationNotFoundError:
        pass
    else:
        return DemoResult(key, store.view(key), 0, [], created=False)
    version = 0
    request_seq = 0
    steps: list[tuple[str, int]] = []
    for title, batch in build_demo().steps:
        result = store.append(key, batch, expected_version=version)
        for offset, event in enumerate(batch):
            if event["kind"] == "CondensationRequest":
                request_seq = version + 1 + offset
        version = result.version
        steps.append((title, version))
    return DemoResult(key, store.view(key), request_seq, steps, created=True)
