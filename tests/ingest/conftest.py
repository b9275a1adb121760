"""The ingest tests against real OpenHands agent servers.

Modules that need ``openhands-agent-server`` start with ``pytest.importorskip(
"openhands.agent_server")``: where it is not installed (the README's ``.venv``, Python 3.11)
they skip. ``.ci/run`` runs this folder again in ``.venv-agent-server`` with
``VIEWSTORE_REQUIRE_AGENT_SERVER=1``, which turns such a skip into a failure, as
``VIEWSTORE_REQUIRE_OPENHANDS`` does for the SDK tests (tests/_required.py).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
