"""Run OpenHands SDK conversations on viewstore (``pip install -e '.[openhands]'`` in a clone).

``ViewstoreFileStore`` is the SDK's ``FileStore`` over an ``EventStore``;
``open_conversation`` builds a ``LocalConversation`` that persists into the store and resumes
from it. Needs openhands-sdk 1.57 or 1.58 (Python 3.12 or newer).
"""

from viewstore.openhands.conversation import open_conversation
from viewstore.openhands.file_store import ViewstoreFileStore

__all__ = ["ViewstoreFileStore", "open_conversation"]
