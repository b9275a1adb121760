"""What a condensation forgot, as SQL reads it: ``condensation_forgotten`` is a SQL view.

Each id a ``Condensation`` lists is in its payload in the log (``forgotten_event_ids``), so the
condensation's row keeps only what the payload does not say: ``condensations.not_in_view``, a
JSON array of the listed ids that were not in the view when it ran (``[]`` nearly always). The
view ``condensation_forgotten`` expands the payload's list with it (``json_each`` on SQLite,
``json_array_elements_text`` on PostgreSQL); every query of it names a conversation and reads
that conversation's condensations and their log rows by their primary keys (docs/schema.md).
"""

from __future__ import annotations

import json


def not_in_view(listed: frozenset[str] | set[str], left: set[str]) -> str:
    """``condensations.not_in_view``: the listed ids that did not leave the view (were not
    in it), as a JSON array in code-point order."""
    return json.dumps(sorted(listed - left), ensure_ascii=False, separators=(",", ":"))
