"""``viewstore serve``: a read-only web viewer over an EventStore (needs the ``web`` extra).

``create_app(url)`` builds the ASGI app; pages are server-rendered (``pages``), the JSON API
lives under /api/ (``api``, described by ``openapi``), and both read their data from ``model``
and ``details`` through EventStore's public reads only.
"""

from viewstore.web.app import create_app

__all__ = ["create_app"]
