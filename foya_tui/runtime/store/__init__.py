"""Provides the SQLite event store (peewee lives only in this package)."""

from foya_tui.runtime.store.checkpoints import (
    AcceptedBoundary,
    CompactionStore,
    Fingerprint,
    StoredCheckpoint,
)
from foya_tui.runtime.store.db import Database, StoreError, open_database
from foya_tui.runtime.store.events import EventStore, UnknownSessionError
from foya_tui.runtime.store.search import SearchError, SearchHit

__all__ = [
    "AcceptedBoundary",
    "CompactionStore",
    "Database",
    "EventStore",
    "Fingerprint",
    "SearchError",
    "SearchHit",
    "StoreError",
    "StoredCheckpoint",
    "UnknownSessionError",
    "open_database",
]
