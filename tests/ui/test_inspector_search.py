"""Provides tests of the inspector's search of history and a segment's source events, against a
real Runtime and SQLite file with the simulator: sessions imported from OpenAI-format transcripts
and compacted (`recall_history`), or `compaction_history` (several checkpoints, a rewind). They
assert the Bridge's messages, the store and what the screen shows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.command import CommandList
from textual.pilot import Pilot
from textual.widgets import Input

from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.store.search import message_body
from foya_tui.runtime.view.history import valid_events
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.messages import HistoryReadFailed, HistorySearched, SourceEventsRead
from foya_tui.ui.screens.history_event import HistoryEventScreen
from foya_tui.ui.screens.inspector import SELECT_SEGMENT, InspectorScreen
from foya_tui.ui.widgets.checkpoint_tree import CheckpointTree, TreeEntry
from foya_tui.ui.widgets.history_list import HistoryList
from tests.snapshots.snapshot_scene import (
    MARKUP_MESSAGE,
    SEGMENTED,
    compaction_history,
    fixed_surroundings,
    open_runtime,
    recall_history,
)
from tests.ui.screen_text import visible_text
from tests.ui.test_compaction_ui import notifications, of_type, record

WIDE = (120, 40)
WaitUntil = Callable[..., Awaitable[None]]


@pytest.fixture
def recall(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    """A Runtime on the snapshot scene holding `recall_history`'s session: one current checkpoint
    whose segment 1 summarises seq 1–13; seq 14 is verbatim."""
    with fixed_surroundings():
        runtime = open_runtime(tmp_path)
        try:
            yield runtime, recall_history(runtime)
        finally:
            runtime.close()


@pytest.fixture
def history(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    """`compaction_history`'s session: checkpoint B (3 segments, earlier) and C (current), a rewind
    inside B's first segment."""
    with fixed_surroundings():
        runtime = open_runtime(tmp_path, settings=SEGMENTED)
        try:
            yield runtime, compaction_history(runtime)
        finally:
            runtime.close()


async def inspector_shown(pilot: Pilot[None], wait_until: WaitUntil) -> InspectorScreen:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready)
    await pilot.press("f2")
    await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen) and app.screen.report is not None)
    screen = app.screen
    assert isinstance(screen, InspectorScreen)
    return screen


async def searched(pilot: Pilot[None], inspector: InspectorScreen, query: str, wait_until: WaitUntil) -> None:
    """Press `/`, type `query` over what the box held, Enter, and wait until the hits or the error
    have been shown (the Bridge posted exactly one answer)."""
    posted = record(pilot.app)  # type: ignore[arg-type]
    await pilot.press("slash")
    box = inspector.query_one("#search-input", Input)
    assert inspector.focused is box
    box.value = ""
    await pilot.press(*query, "enter")

    def answers() -> int:
        return len(of_type(posted, HistorySearched) + of_type(posted, HistoryReadFailed))

    await wait_until(pilot, lambda: answers() > 0 and "searching…" not in title(inspector))
    assert answers() == 1


def listed(inspector: InspectorScreen) -> list[int]:
    return [hit.seq for hit in inspector.history_list.hits]


def title(inspector: InspectorScreen) -> str:
    return visible_text(inspector.query_one("#detail-title"))


async def test_search_finds_a_chinese_word_and_a_phrase_and_says_what_summarises_each_hit(
    recall: tuple[Runtime, str], wait_until: WaitUntil
) -> None:
    runtime, session_id = recall
    checkpoint_id = runtime.inspect(session_id).current_id
    assert checkpoint_id is not None
    summarised = f"summarised by checkpoint {checkpoint_id[:8]}… seg 1"
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        inspector = await inspector_shown(pilot, wait_until)

        await searched(pilot, inspector, "目录", wait_until)  # two characters: shorter than a trigram
        assert listed(inspector) == [1]
        rows = visible_text(inspector.history_list)
        assert f"seq 1 · user · {summarised}" in rows and "请列出项目目录里的文件" in rows
        assert inspector.focused is inspector.history_list

        await searched(pilot, inspector, '"flaky io test"', wait_until)
        assert listed(inspector) == [14, 13, 8, 5]  # newest first
        assert listed(inspector) == [hit.seq for hit in runtime.search(session_id, '"flaky io test"')]
        assert title(inspector) == 'SEARCH · "flaky io test" · 4 hits, newest first'
        lines = visible_text(inspector.history_list).splitlines()
        assert lines[0] == "seq 14 · assistant · verbatim in context"  # after the checkpoint
        assert lines[2] == f"seq 13 · user · {summarised}"

        await searched(pilot, inspector, "nowhere-to-be-found", wait_until)
        assert listed(inspector) == []
        assert "no event of valid history matches" in title(inspector)


async def test_a_bad_query_is_one_error_sentence(recall: tuple[Runtime, str], wait_until: WaitUntil) -> None:
    runtime, session_id = recall
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        inspector = await inspector_shown(pilot, wait_until)
        await searched(pilot, inspector, '"unclosed phrase', wait_until)
        await wait_until(pilot, lambda: bool(notifications(app)))
        assert notifications(app) == [
            ('The search query has an unbalanced quote: close the "phrase".', "error")
        ]
        assert app.screen is inspector and inspector.listing == "search"
        assert inspector.focused is inspector.query_one("#search-input", Input)  # to correct it
        assert title(inspector).endswith("· not run")

        await searched(pilot, inspector, "", wait_until)
        await wait_until(pilot, lambda: len(notifications(app)) == 2)
        assert notifications(app)[-1] == ("The search query is empty.", "error")


async def test_a_hit_opens_in_full_as_plain_text_and_leads_to_its_segment(
    recall: tuple[Runtime, str], wait_until: WaitUntil
) -> None:
    runtime, session_id = recall
    checkpoint_id = runtime.inspect(session_id).current_id
    assert checkpoint_id is not None
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        inspector = await inspector_shown(pilot, wait_until)
        await searched(pilot, inspector, "Tuesdays", wait_until)
        assert listed(inspector) == [5]
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryEventScreen))
        viewer = app.screen
        assert isinstance(viewer, HistoryEventScreen)
        assert viewer.prepared.text == MARKUP_MESSAGE  # the whole event, from canonical history
        shown = visible_text(viewer)
        assert "Keep [bold]this[/bold] exactly as written" in shown  # markup is not parsed
        assert "Second line: [red]stays[/] too." in shown
        assert f"summarised by checkpoint {checkpoint_id[:8]}… seg 1 · the segment covers seq 1–13" in shown
        assert viewer.query_one("#output-dialog").border_title == "user · seq 5 · canonical history"

        # g: back to the inspector, the list closed, the segment selected in the tree.
        await pilot.press("g")
        await wait_until(pilot, lambda: app.screen is inspector)
        assert inspector.listing is None and inspector.focused is inspector.tree
        node = inspector.tree.cursor_node
        assert node is not None and isinstance(node.data, TreeEntry) and node.data.segment is not None
        assert (node.data.record.id, node.data.segment.index) == (checkpoint_id, 1)  # type: ignore[union-attr]
        assert title(inspector).startswith("SEGMENT 1 · SEQ 1–13")


async def test_a_verbatim_hit_has_no_segment_to_go_to(
    recall: tuple[Runtime, str], wait_until: WaitUntil
) -> None:
    runtime, session_id = recall
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        inspector = await inspector_shown(pilot, wait_until)
        await searched(pilot, inspector, "mock the disk", wait_until)
        assert listed(inspector) == [14]
        await pilot.click(HistoryList, offset=(2, 0))  # a click opens it too
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryEventScreen))
        viewer = app.screen
        assert "verbatim in context · no checkpoint segment summarises it" in visible_text(viewer)
        assert "g go to the segment" not in visible_text(viewer)
        await pilot.press("g")  # hidden, and does nothing
        await pilot.pause()
        assert app.screen is viewer
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is inspector)
        assert inspector.listing == "search" and listed(inspector) == [14]  # the hits are still there


async def test_s_lists_exactly_the_source_events_of_a_segment(
    history: tuple[Runtime, str], wait_until: WaitUntil
) -> None:
    runtime, session_id = history
    report = runtime.inspect(session_id)
    earlier, _current = [r for r in report.records if r.usable]
    assert earlier.checkpoint is not None
    segment = earlier.checkpoint.segments[0]
    rewound = report.rewound[0]
    events = runtime.parts.store.events(session_id)
    in_range = [e for e in events if segment.from_seq <= e.seq <= segment.through_seq]
    # What makes "exactly" mean something here: the range holds a rewound turn and events that are
    # not messages (usage records, a compaction's events, the rewind itself).
    assert segment.from_seq <= rewound.first_seq and rewound.rewind_seq <= segment.through_seq
    assert any(message_body(str(e.kind), e.payload) is None for e in in_range)
    expected = [
        e.seq
        for e in valid_events(events)
        if segment.from_seq <= e.seq <= segment.through_seq and message_body(str(e.kind), e.payload)
    ]
    assert not set(range(rewound.first_seq, rewound.last_seq + 1)) & set(expected)

    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        inspector = await inspector_shown(pilot, wait_until)
        posted = record(app)
        await pilot.press("up")  # the current checkpoint's line: not a segment
        await pilot.press("s")
        await wait_until(pilot, lambda: bool(notifications(app)))
        assert notifications(app)[-1] == (SELECT_SEGMENT, "information")
        assert inspector.listing is None

        await pilot.press("down", "down", "down")  # the earlier checkpoint's first segment
        await pilot.press("s")
        await wait_until(pilot, lambda: bool(of_type(posted, SourceEventsRead)))
        assert listed(inspector) == expected
        count = len(expected)
        assert title(inspector).startswith(
            f"SOURCE EVENTS · SEGMENT 1 · SEQ {segment.from_seq}–{segment.through_seq} · {count} messages"
        )
        assert inspector.focused is inspector.history_list

        # One opens as a search hit does; its segment is the earlier checkpoint's, and says so.
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryEventScreen))
        viewer = app.screen
        assert isinstance(viewer, HistoryEventScreen) and viewer.hit.seq == expected[0]
        first = runtime.parts.store.event(session_id, expected[0])
        assert first is not None and viewer.prepared.text == message_body(str(first.kind), first.payload)[1]  # type: ignore[index]
        assert f"summarised by checkpoint {earlier.id[:8]}… seg 1 (earlier)" in visible_text(viewer)

        # Esc closes the viewer, then the list, then the inspector.
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is inspector)
        assert inspector.listing == "sources"
        await pilot.press("escape")
        await pilot.pause()
        assert inspector.listing is None and app.screen is inspector
        assert title(inspector).startswith(f"SEGMENT 1 · SEQ {segment.from_seq}–{segment.through_seq}")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.conversation)


async def test_esc_closes_the_search_and_a_second_esc_the_inspector(
    recall: tuple[Runtime, str], wait_until: WaitUntil
) -> None:
    runtime, session_id = recall
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        inspector = await inspector_shown(pilot, wait_until)
        segment_title = title(inspector)
        await pilot.press("slash")
        assert inspector.listing == "search" and title(inspector) == "SEARCH HISTORY"
        await pilot.press("escape")  # from the empty search box
        await pilot.pause()
        assert inspector.listing is None and app.screen is inspector
        assert inspector.focused is inspector.query_one(CheckpointTree)
        assert title(inspector) == segment_title

        await searched(pilot, inspector, "cache", wait_until)
        assert listed(inspector)
        await pilot.press("escape")  # from the hits
        await pilot.pause()
        assert inspector.listing is None and not inspector.history_list.display
        assert inspector.query_one("#detail-scroll").display and title(inspector) == segment_title
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.conversation)


async def test_the_palette_opens_the_inspector_with_the_search_box_focused(
    recall: tuple[Runtime, str], wait_until: WaitUntil
) -> None:
    runtime, session_id = recall
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        await pilot.press("ctrl+p")
        await pilot.press(*"inspector: search history")
        await wait_until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen))
        inspector = app.screen
        assert isinstance(inspector, InspectorScreen)
        await wait_until(pilot, lambda: isinstance(inspector.focused, Input))
        assert inspector.listing == "search"
        await pilot.press(*"解析器", "enter")
        await wait_until(pilot, lambda: bool(inspector.history_list.hits))
        assert listed(inspector) == [1]


def test_the_search_keys_have_ids_and_tooltips() -> None:
    keys = {}
    for owner in (InspectorScreen, HistoryEventScreen):
        for binding in owner.BINDINGS:
            assert isinstance(binding, Binding) and binding.id and binding.tooltip, (owner, binding)
            keys[binding.id] = binding.key
    assert keys["inspector.search"] == "slash" and keys["inspector.sources"] == "s"
    assert keys["inspector.back"] == keys["inspector.close"] == "escape"
    assert keys["event.segment"] == "g"
