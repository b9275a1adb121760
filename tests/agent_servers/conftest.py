"""Agent servers on the store: real ``openhands-agent-server`` processes started with
``--import-modules viewstore.openhands.on_store``.

Modules here start with ``pytest.importorskip("openhands.agent_server")``: in the README's
``.venv`` (no agent server) they skip; ``.ci/run`` runs this folder in ``.venv-agent-server``
with ``VIEWSTORE_REQUIRE_AGENT_SERVER=1``, which turns such a skip into a failure.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
