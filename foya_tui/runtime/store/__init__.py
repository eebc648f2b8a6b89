"""Provides the SQLite event store (peewee lives only in this package)."""

from foya_tui.runtime.store.checkpoints import (
    AcceptedBoundary,
    CompactionStore,
    Fingerprint,
    StoredCheckpoint,
)
from foya_tui.runtime.store.db import (
    Database,
    DatabaseBusy,
    DatabaseDamaged,
    DatabaseFault,
    DatabaseReadOnly,
    DiskFull,
    StoreError,
    database_fault,
    open_database,
)
from foya_tui.runtime.store.events import EventStore, UnknownSessionError
from foya_tui.runtime.store.integrity import StoreCheck, check_store, repair_store
from foya_tui.runtime.store.lease import SessionBusy, SessionLease, claim_session
from foya_tui.runtime.store.search import SearchError, SearchHit, SearchIndexDamaged

__all__ = [
    "AcceptedBoundary",
    "CompactionStore",
    "Database",
    "DatabaseBusy",
    "DatabaseDamaged",
    "DatabaseFault",
    "DatabaseReadOnly",
    "DiskFull",
    "EventStore",
    "Fingerprint",
    "SearchError",
    "SearchHit",
    "SearchIndexDamaged",
    "SessionBusy",
    "SessionLease",
    "StoreCheck",
    "StoreError",
    "StoredCheckpoint",
    "UnknownSessionError",
    "check_store",
    "claim_session",
    "database_fault",
    "open_database",
    "repair_store",
]
