"""What an ingest process has answered, for an operator: ``GET /metrics`` in Prometheus' text
format. Counters live in the process (each ingest process of a fleet has its own; a scraper
sums them) and start at zero with it.

- ``viewstore_ingest_posts_total{source, route, status}``: every answered post;
- ``viewstore_ingest_refusals_total{source, reason}``: the refused ones, by why (``reason``:
  ``not_owner``, ``not_prefix``, ``duplicate``, ``erased``, ``bad_request``, ``too_large``,
  ``agent_server``, ``busy``, ``database``, ``disconnected``); ``source`` is ``-`` when the
  post named no configured source;
- ``viewstore_ingest_events_appended_total{source}``: events stored.
"""

from __future__ import annotations

import threading
from collections import Counter

NO_SOURCE = "-"


class Metrics:
    """Thread-safe counters (the ingest's work runs in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._posts: Counter[tuple[str, str, int]] = Counter()
        self._refusals: Counter[tuple[str, str]] = Counter()
        self._appended: Counter[str] = Counter()

    def answered(self, source: str | None, route: str, status: int, reason: str | None) -> None:
        name = source or NO_SOURCE
        with self._lock:
            self._posts[name, route, status] += 1
            if reason is not None:
                self._refusals[name, reason] += 1

    def appended(self, source: str, count: int) -> None:
        if count:
            with self._lock:
                self._appended[source] += count

    def render(self) -> str:
        with self._lock:
            posts = sorted(self._posts.items())
            refusals = sorted(self._refusals.items())
            appended = sorted(self._appended.items())
        lines = [
            "# HELP viewstore_ingest_posts_total Posts answered, by source, route and status.",
            "# TYPE viewstore_ingest_posts_total counter",
            *(
                f"viewstore_ingest_posts_total{_labels(source=s, route=r, status=str(c))} {n}"
                for (s, r, c), n in posts
            ),
            "# HELP viewstore_ingest_refusals_total Posts refused (nothing stored), by reason.",
            "# TYPE viewstore_ingest_refusals_total counter",
            *(
                f"viewstore_ingest_refusals_total{_labels(source=s, reason=r)} {n}"
                for (s, r), n in refusals
            ),
            "# HELP viewstore_ingest_events_appended_total Events stored, by source.",
            "# TYPE viewstore_ingest_events_appended_total counter",
            *(
                f"viewstore_ingest_events_appended_total{_labels(source=s)} {n}"
                for s, n in appended
            ),
        ]
        return "\n".join(lines) + "\n"


def _labels(**values: str) -> str:
    # Source names are [A-Za-z0-9._-] (sources.check_name); escaping keeps any label valid.
    escaped = (
        f'{name}="{value.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for name, value in values.items()
    )
    return "{" + ",".join(escaped) + "}"
