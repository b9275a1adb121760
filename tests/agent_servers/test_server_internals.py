"""The agent server's internals that viewstore.openhands.server_internals reaches for, checked
on the installed release (as tests/openhands/test_sdk_internals.py checks the SDK's): a
release that moves one fails here, by name, before any server runs on the store."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("openhands.agent_server", reason="openhands.agent_server is not importable")

from viewstore.openhands import server_internals


def test_the_installed_release_is_supported() -> None:
    assert server_internals.check_version().startswith("1.58.")


def test_every_reached_name_exists() -> None:
    assert server_internals.missing() == []


def test_the_replaced_functions_take_what_the_replacements_take() -> None:
    """The replacements are called as the originals are: same parameter names."""
    from openhands.agent_server import (  # noqa: PLC0415 - after the importorskip
        conversation_service,
        dependencies,
        event_service,
    )
    from openhands.agent_server.conversation_lease import ConversationLease  # noqa: PLC0415

    def names(function: object) -> list[str]:
        return list(inspect.signature(function).parameters)  # type: ignore[arg-type]

    assert names(ConversationLease.__init__) == [
        "self",
        "conversation_dir",
        "owner_instance_id",
        "ttl_seconds",
    ]
    for method in ("claim", "renew", "guarded_write", "release"):
        assert hasattr(server_internals.StoreLease, method)
        assert (
            names(getattr(ConversationLease, method))[1:]
            == names(getattr(server_internals.StoreLease, method))[1:]
        )
    assert names(event_service.EventService.save_meta) == ["self", "stored"]
    assert names(event_service.EventService._last_goal_loop_status) == ["self"]
    assert names(event_service.EventService.for_persisted_events) == [
        "stored",
        "conversations_dir",
    ]
    service = conversation_service.ConversationService
    assert names(service._load_catalog_sync) == ["self", "conversation_id"]
    assert names(service._search_conversations) == [
        "self",
        "page_id",
        "limit",
        "execution_status",
        "sort_order",
    ]
    assert names(service._count_conversations) == ["self", "execution_status"]
    assert names(service._get_or_load_event_service_locked)[:2] == ["self", "conversation_id"]
    assert names(conversation_service._state_signature) == ["base_state_path"]
    assert names(dependencies.get_event_service) == [
        "conversation_id",
        "request",
        "conversation_service",
    ]
    assert "persistence_dir" in names(event_service.LocalConversation.__init__)
    assert "file_store" in names(event_service.LocalConversation.__init__)
