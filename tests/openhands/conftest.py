"""The OpenHands SDK tests: the real SDK, offline.

Each module starts with ``pytest.importorskip("openhands.sdk")``, so where the SDK cannot be
installed (it needs Python 3.12) they skip with the reason. With
``VIEWSTORE_REQUIRE_OPENHANDS=1`` (set by .ci/run) such a skip fails the session instead,
as ``VIEWSTORE_REQUIRE_POSTGRES`` does for PostgreSQL (the plugin in tests/_required.py).
"""

from __future__ import annotations

import os

# Offline: LiteLLM must not try to download its model cost map; no SDK banner in the output.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

SDK_SKIP_REASON = "openhands.sdk is not importable (pip install -e '.[openhands]' (in a clone))"
