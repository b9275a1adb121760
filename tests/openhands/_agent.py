"""A real OpenHands agent for the tests, fully offline: scripted ``TestLLM`` responses, a
custom tool that appends lines to a file in the workspace, and an ``LLMSummarizingCondenser``
small enough that condensations happen every few steps.

Also worker entry points, so a conversation can be driven from separate processes:
``python -m tests.openhands._agent run|duel ...`` (see ``run`` and ``duel``).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

import json
import sys
import uuid
from pathlib import Path
from typing import Any

from openhands.sdk import Agent, LLMSummarizingCondenser, Message, TextContent
from openhands.sdk.llm import MessageToolCall, ThinkingBlock
from openhands.sdk.testing import TestLLM
from openhands.sdk.tool import (
    Action,
    Observation,
    Tool,
    ToolDefinition,
    ToolExecutor,
    register_tool,
)
from pydantic import Field

OUTPUT = "notes.txt"


class AppendLineAction(Action):
    line: str = Field(description="the line to append")


class AppendLineObservation(Observation):
    pass


class AppendLineExecutor(ToolExecutor[AppendLineAction, AppendLineObservation]):
    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def __call__(self, action: AppendLineAction, conversation: Any = None) -> AppendLineObservation:
        with (self.root / OUTPUT).open("a", encoding="utf-8") as f:
            f.write(action.line + "\n")
        return AppendLineObservation.from_text(f"appended {action.line!r} to {OUTPUT}")


class AppendLineTool(ToolDefinition[AppendLineAction, AppendLineObservation]):
    @classmethod
    def create(cls, conv_state: Any = None, **params: Any) -> list[AppendLineTool]:
        return [
            cls(
                description=f"Append one line to {OUTPUT} in the workspace.",
                action_type=AppendLineAction,
                observation_type=AppendLineObservation,
                executor=AppendLineExecutor(conv_state.workspace.working_dir),
            )
        ]


register_tool("append_line", AppendLineTool)


def _call(line: str) -> MessageToolCall:
    return MessageToolCall(
        id=f"call-{uuid.uuid4().hex[:12]}",
        name="append_line",
        arguments=json.dumps({"line": line}),
        origin="completion",
    )


def script(steps: int, tag: str) -> list[Message]:
    """``steps`` tool-calling responses, then a final answer. Every third response calls two
    tools in parallel, every third thinks first (a thinking tool loop), the rest call one."""
    responses = []
    for i in range(steps):
        line = f"{tag}-{i}"
        if i % 3 == 0:
            responses.append(
                Message(
                    role="assistant",
                    content=[TextContent(text="")],
                    tool_calls=[_call(line + "a"), _call(line + "b")],
                )
            )
        elif i % 3 == 1:
            responses.append(
                Message(
                    role="assistant",
                    content=[TextContent(text="")],
                    thinking_blocks=[ThinkingBlock(thinking=f"plan {line}", signature="sig")],
                    tool_calls=[_call(line)],
                )
            )
        else:
            responses.append(
                Message(role="assistant", content=[TextContent(text="")], tool_calls=[_call(line)])
            )
    responses.append(Message(role="assistant", content=[TextContent(text=f"{tag}: done")]))
    return responses


def expected_lines(steps: int, tag: str) -> list[str]:
    """The lines the tool writes when ``script(steps, tag)`` runs to its end."""
    return [f"{tag}-{i}{s}" for i in range(steps) for s in (("a", "b") if i % 3 == 0 else ("",))]


def make_agent(steps: int, tag: str, *, max_size: int = 8) -> Agent:
    summaries = [
        Message(role="assistant", content=[TextContent(text=f"{tag} summary {i}")])
        for i in range(200)
    ]
    return Agent(
        llm=TestLLM.from_messages(script(steps, tag)),
        tools=[Tool(name="append_line")],
        condenser=LLMSummarizingCondenser(
            llm=TestLLM.from_messages(summaries), max_size=max_size, keep_first=1
        ),
    )


def sdk_view(conversation: Any) -> dict[str, Any]:
    view = conversation.state.view
    return {
        "event_ids": [event.id for event in view.events],
        "manipulation_indices": sorted(view.manipulation_indices),
        "unhandled_condensation_request": view.unhandled_condensation_request,
    }


def store_view(store: Any, conversation_id: Any) -> dict[str, Any]:
    view = store.view(conversation_id)
    return {
        "event_ids": view.event_ids,
        "manipulation_indices": list(view.manipulation_indices),
        "unhandled_condensation_request": view.unhandled_condensation_request,
    }


def run(argv: list[str]) -> int:
    """``run URL CONVERSATION WORKSPACE STEPS TAG [--message TEXT]``: open (or resume), send
    the message if any, run to the end, print the final view."""
    from viewstore import EventStore  # noqa: PLC0415
    from viewstore.openhands import open_conversation  # noqa: PLC0415

    url, conversation_id, workspace, steps, tag = argv[:5]
    message = argv[argv.index("--message") + 1] if "--message" in argv else None
    with EventStore(url) as store:
        conversation = open_conversation(
            store, make_agent(int(steps), tag), workspace, conversation_id, visualizer=None
        )
        if message is not None:
            conversation.send_message(message)
        conversation.run()
        print(json.dumps({"ok": True, "view": sdk_view(conversation)}), flush=True)
    return 0


def duel(argv: list[str]) -> int:
    """``duel URL CONVERSATION WORKSPACE NAME``: on ``open`` resume the conversation and say
    ``ready``; on ``go R`` send one message and report whether it was stored or refused."""
    from viewstore import ConcurrencyError, EventStore  # noqa: PLC0415
    from viewstore.openhands import open_conversation  # noqa: PLC0415

    url, conversation_id, workspace, name = argv[:4]
    conversation: Any = None
    with EventStore(url) as store:
        for line in sys.stdin:
            command = line.split()
            if command == ["open"]:
                conversation = open_conversation(
                    store, make_agent(0, name), workspace, conversation_id, visualizer=None
                )
                print("ready", flush=True)
            elif command[:1] == ["go"]:
                outcome: dict[str, Any] = {"round": int(command[1]), "name": name}
                try:
                    conversation.send_message(f"{name} round {command[1]}")
                    outcome["ok"] = True
                except ConcurrencyError as error:
                    outcome["conflict"] = [error.expected, error.actual]
                print(json.dumps(outcome), flush=True)
            else:
                break
    return 0


if __name__ == "__main__":
    sys.exit({"run": run, "duel": duel}[sys.argv[1]](sys.argv[2:]))
