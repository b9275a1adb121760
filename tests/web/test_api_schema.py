"""The JSON API against its own OpenAPI schema (schemathesis), on SQLite and PostgreSQL:
generated requests (mostly bad or unknown ids: 400/404 answers must match the schema too) and
requests for the real conversations, whose answers are checked the same way."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from viewstore.web import create_app

from ._data import Browsed

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def api_schema(db_url: str, browsed: Browsed) -> Any:
    return schemathesis.openapi.from_asgi("/api/openapi.json", create_app(db_url))


def test_generated_requests_match_the_schema(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) == 8
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            case.call_and_validate(checks=CHECKS)

        check()


REAL = [
    ("/api/conversations", {}, {"q": "two", "sort": "id", "order": "asc", "limit": 2}),
    ("/api/c/{conversation_id}/view", {"conversation_id": "two-ranges"}, {"seq": 9}),
    ("/api/c/{conversation_id}/view", {"conversation_id": "two-ranges"}, {}),
    ("/api/c/{conversation_id}/log", {"conversation_id": "two-ranges"}, {"seq": 9, "limit": 5}),
    ("/api/c/{conversation_id}/diff", {"conversation_id": "two-ranges"}, {"from": 9, "to": 11}),
    ("/api/c/{conversation_id}/audit", {"conversation_id": "demo-conversation"}, {}),
    (
        "/api/c/{conversation_id}/condensation/{seq}",
        {"conversation_id": "two-ranges", "seq": 10},
        {},
    ),
    (
        "/api/c/{conversation_id}/e/{event_id}",
        {"conversation_id": "two-ranges", "event_id": "c1"},
        {},
    ),
]


@pytest.mark.parametrize(("path", "path_parameters", "query"), REAL)
def test_real_answers_match_the_schema(
    api_schema: Any, path: str, path_parameters: dict[str, Any], query: dict[str, Any]
) -> None:
    case = api_schema[path]["GET"].Case(path_parameters=path_parameters, query=query)
    response = case.call_and_validate(checks=CHECKS)
    assert response.status_code == 200
