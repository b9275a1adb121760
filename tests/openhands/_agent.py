"""A real OpenHands agent for the tests, fully offline: scripted ``TestLLM`` responses, a
custom tool that appends lines to a file in the workspace, and an ``LLMSummarizingCondenser``
small enough that condensations happen every few steps.

Also a worker entry point, so a conversation can be driven from a separate process:
``python -m tests.openhands._agent URL CONVERSATION WORKSPACE STEPS TAG [--message TEXT]``.
It prints one JSON line per outcome (``{"step": n, "ok": true}`` or ``{"conflict": ...}``).
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


def main(argv: list[str]) -> int:
    from viewstore import ConcurrencyError, EventStore  # noqa: PLC0415
    from viewstore.openhands import open_conversation  # noqa: PLC0415

    url, conversation_id, workspace, steps, tag = argv[:5]
    message = argv[argv.index("--message") + 1] if "--message" in argv else None
    store = EventStore(url)
    try:
        conversation = open_conversation(
            store, make_agent(int(steps), tag), workspace, conversation_id, visualizer=None
        )
        if message is not None:
            conversation.send_message(message)
        conversation.run()
        print(json.dumps({"ok": True, "view": sdk_view(conversation)}), flush=True)
    except ConcurrencyError as error:
        print(json.dumps({"conflict": [error.expected, error.actual]}), flush=True)
        return 3
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
