"""Tests how ConversationScreen is put together from its flows, without an app: Textual dispatches
an `on_*` handler from every class of the screen's MRO, so each handler, action and helper must be
defined in exactly one of them, and the flows must add no Textual class (and no CSS) of their own."""

from __future__ import annotations

import inspect

from textual.dom import DOMNode
from textual.screen import Screen

from foya_tui.ui.screens.conversation import ConversationScreen
from foya_tui.ui.screens.conversation_commands import CommandFlow
from foya_tui.ui.screens.conversation_compaction import CompactionFlow
from foya_tui.ui.screens.conversation_history import HistoryFlow
from foya_tui.ui.screens.conversation_sessions import SessionsFlow
from foya_tui.ui.screens.conversation_turn import TurnFlow

FLOWS = (TurnFlow, CompactionFlow, HistoryFlow, CommandFlow, SessionsFlow)
OWN = (ConversationScreen, *FLOWS)


def functions(cls: type) -> set[str]:
    return {
        name for name, value in vars(cls).items() if inspect.isfunction(value) or isinstance(value, property)
    }


def test_no_method_is_defined_in_two_of_the_screens_classes() -> None:
    seen: dict[str, type] = {}
    for cls in OWN:
        for name in functions(cls) - {"__init__"}:
            assert name not in seen, f"{name} is defined in {seen[name].__name__} and {cls.__name__}"
            seen[name] = cls


def test_each_flow_owns_its_handlers() -> None:
    assert {"on_prompt_submitted", "on_runtime_updated", "on_approval_requested"} <= functions(TurnFlow)
    assert {"on_compaction_proposed", "on_compaction_ended", "action_undo_compaction"} <= functions(
        CompactionFlow
    )
    assert {"on_session_rewound", "on_session_forked", "action_fork_session"} <= functions(HistoryFlow)
    for flow in FLOWS:
        assert flow in ConversationScreen.__mro__


def test_the_flows_are_plain_mixins_before_screen() -> None:
    mro = ConversationScreen.__mro__
    assert mro[: len(OWN) + 1] == (*OWN, Screen)
    for flow in FLOWS:
        assert not issubclass(flow, DOMNode)
    # What Textual matches CSS against is unchanged by the split.
    assert ConversationScreen._css_type_names == {"ConversationScreen", "Screen", "Widget", "DOMNode"}
