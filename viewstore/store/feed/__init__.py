"""The change feed: every conversation's events in commit order with a resumable cursor, and
its followers (blocking, asyncio, and the hub that shares one listener among many)."""
