"""Provides the migration-progress printer both faces pass to the Runtime (stderr, before any screen).

It lives below `cli` and `ui` so that neither imports the other for it: the CLI starts the UI,
and the UI must not import the CLI back.
"""

from __future__ import annotations

import sys

INDEX_PROGRESS_FROM = 10_000
"""Databases with at least this many events say how a migration (or an index rebuild) goes."""


def index_progress(done: int, total: int) -> None:
    """Progress of a migration that walks an older database's events (the search index, running
    digests, token counts) or of a search index rebuild, on stderr."""
    if total >= INDEX_PROGRESS_FROM and (done == total or done % max(5_000, total // 10) < 5_000):
        print(f"foya: updating the database for this version: {done:,} of {total:,} events", file=sys.stderr)
