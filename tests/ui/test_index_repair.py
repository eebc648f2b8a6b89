"""A search index found out of date in the TUI is said once, with the way to rebuild it, and
`/repair` rebuilds it there, as `foya verify --repair` does (issue 15: the TUI offers the same)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.messages import SearchIndexStale
from foya_tui.ui.widgets.prompt import Prompt
from tests.ui.conftest import WaitUntil
from tests.ui.probes import notifications, record


def said(app: FoyaApp, words: str) -> list[str]:
    return [text for text, _ in notifications(app) if words in text]


def damage_the_index(runtime: Runtime) -> None:
    raw = sqlite3.connect(runtime.paths.database)
    try:
        raw.execute("UPDATE event_fts_data SET block = randomblob(length(block))")
        raw.commit()
    finally:
        raw.close()


async def test_an_out_of_date_index_is_offered_and_rebuilt_with_slash_repair(
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil
) -> None:
    runtime = make_runtime()
    session = runtime.new_session()
    list(session.send("the first needle"))
    damage_the_index(runtime)
    list(session.send("a second needle"))  # the write commits; the index is marked out of date
    assert runtime.search_index_problem() is not None
    app = FoyaApp(runtime, session_id=session.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: bool(said(app, "Search cannot answer")))
        (offer,) = said(app, "Search cannot answer")
        assert "/repair" in offer and "search index: rebuild" in offer
        await wait_until(pilot, lambda: app.conversation.ready)
        prompt = app.conversation.query_one(Prompt)
        prompt.insert("/repair")
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(said(app, "Repaired:")))
        assert "rebuilt the search index" in said(app, "Repaired:")[0]
        assert runtime.search_index_problem() is None
        hits = runtime.search(session.id, "needle")
        assert {hit.seq for hit in hits} >= {
            e.seq for e in runtime.events(session.id) if "needle" in str(e.payload)
        }
        # All in step now: a second repair says there was nothing to do.
        prompt.insert("/repair")
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(said(app, "Nothing needed repair")))


async def test_a_search_that_meets_a_damaged_index_offers_the_repair_once(
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil
) -> None:
    runtime = make_runtime()
    session = runtime.new_session()
    list(session.send("the first needle"))
    app = FoyaApp(runtime, session_id=session.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert not said(app, "Search cannot answer")  # in step: nothing is offered
        raw = sqlite3.connect(runtime.paths.database)
        try:
            raw.execute("DROP TABLE event_fts_idx")
            raw.commit()
        finally:
            raw.close()
        posted = record(app)

        def stale_said() -> int:
            return sum(isinstance(m, SearchIndexStale) for m in posted)

        for searches in (1, 2):
            app.conversation.bridge.search_history("needle")
            await wait_until(pilot, lambda n=searches: stale_said() == n)
            await pilot.pause()  # the screen handled the message the bridge posted
        assert len(said(app, "Search cannot answer")) == 1
