"""``viewstore ingest``: the webhook receiver for a fleet of OpenHands agent servers, and
``viewstore sync``: the same pull without webhooks (docs/fleet.md).

The ingest speaks HTTP and JSON only: it imports neither the OpenHands SDK nor the agent
server, so it runs wherever viewstore does (Python 3.11 too). Its parts:

- ``sources``: which agent servers exist (name, base URL, session API key), from configuration;
- ``agent_server``: a small client of an agent server's REST API (events search, conversations);
- ``pull``: bringing a conversation's stored log up to (a point of) the agent server's log,
  in the server's order, exactly once, never past a gap;
- ``app``: the Starlette app (``POST /events/{hex}``, ``POST /conversations``), its token and
  limits.
"""
