"""Tests the conversation screen's busy state without an app: each activity's prompt line, what esc
cancels, and every refusal rule with the one line the user is told."""

from __future__ import annotations

import pytest

from foya_tui.ui.screens.conversation_state import Activity, ConversationState, Refusal

IDLE = ConversationState(None)
REPLYING = ConversationState(Activity.REPLYING)
OTHERS = [activity for activity in Activity if activity is not Activity.REPLYING]
HISTORY_ACTIONS = ["compact", "undo a checkpoint", "rewind", "fork"]


def not_yet(activity: Activity) -> Refusal:
    return Refusal(f"Not yet: {activity.value}", "information", 3)


def test_a_new_screen_is_opening_and_refuses_to_send() -> None:
    state = ConversationState()
    assert state.activity is Activity.OPENING and not state.idle
    assert state.busy_line == "opening the session…"
    assert state.refuse_send() is not None


def test_the_flags_each_activity_raises() -> None:
    assert IDLE.idle and IDLE.busy_line is None
    assert not (IDLE.turn_running or IDLE.compacting or IDLE.proposing)
    assert REPLYING.turn_running and not REPLYING.compacting and not REPLYING.proposing
    proposing = ConversationState(Activity.COMPACTING)
    assert proposing.compacting and proposing.proposing and not proposing.turn_running
    deciding = ConversationState(Activity.DECIDING)
    assert deciding.compacting and not deciding.proposing  # esc no longer cancels it
    for activity in (Activity.OPENING, Activity.SWITCHING, Activity.UNDOING, Activity.REWINDING):
        state = ConversationState(activity)
        assert not (state.turn_running or state.compacting or state.proposing or state.idle)
        assert state.busy_line == activity.value


def test_busy_lines_are_the_prompts_lines() -> None:
    assert REPLYING.busy_line == "a reply is being written · esc cancel · you can type your next message"
    assert ConversationState(Activity.COMPACTING).busy_line == (
        "compacting the context · esc cancel · you can type your next message"
    )
    assert ConversationState(Activity.DECIDING).busy_line == "a compaction waits for your answer"
    assert ConversationState(Activity.FORKING).busy_line == "forking a new session…"
    assert len({activity.value for activity in Activity}) == len(Activity)


@pytest.mark.parametrize("activity", list(Activity))
def test_enter_sends_only_when_idle(activity: Activity) -> None:
    assert IDLE.refuse_send() is None
    assert ConversationState(activity).refuse_send() == Refusal(
        "Wait for the reply to finish, or press esc to cancel it.", "information", 3
    )


def test_the_route_cannot_switch_during_a_reply_nor_while_anything_else_runs() -> None:
    assert IDLE.refuse_switch() is None
    assert REPLYING.refuse_switch() == Refusal(
        "The route cannot change while a reply is being written; wait for it or press esc.", "warning"
    )
    for activity in OTHERS:
        assert ConversationState(activity).refuse_switch() == not_yet(activity)


def test_a_new_conversation_waits_for_whatever_runs() -> None:
    assert IDLE.refuse_new_conversation() is None
    assert REPLYING.refuse_new_conversation() == Refusal("Cancel the running reply first (esc).", "warning")
    for activity in OTHERS:
        assert ConversationState(activity).refuse_new_conversation() == not_yet(activity)


@pytest.mark.parametrize("action", HISTORY_ACTIONS)
def test_history_actions_wait_for_a_reply_then_anything_else_then_need_a_session(action: str) -> None:
    assert IDLE.refuse(action, has_session=True) is None
    # A running reply is named first, even without a session (the first message creates it).
    for has_session in (True, False):
        assert REPLYING.refuse(action, has_session=has_session) == Refusal(
            f"Cannot {action} while a reply is being written; wait for it or press esc.", "warning"
        )
    for activity in OTHERS:
        for has_session in (True, False):
            assert ConversationState(activity).refuse(action, has_session=has_session) == not_yet(activity)
    assert IDLE.refuse(action, has_session=False) == Refusal(
        f"Nothing to {action} yet: send a message first.", "information", 3
    )


def test_the_state_is_a_value() -> None:
    assert ConversationState(Activity.FORKING) == ConversationState(Activity.FORKING)
    with pytest.raises(AttributeError):
        IDLE.activity = Activity.REPLYING  # type: ignore[misc]


def test_a_reply_says_which_step_runs_and_other_activities_ignore_steps() -> None:
    at_two = REPLYING.at_step(2, 500)
    assert at_two.busy_line == (
        "step 2 of 500 · a reply is being written · esc cancel · you can type your next message"
    )
    assert at_two.turn_running and at_two.refuse_send() == REPLYING.refuse_send()
    assert REPLYING.at_step(1_200, 5_000).busy_line.startswith("step 1,200 of 5,000 · ")
    for activity in OTHERS:
        assert ConversationState(activity).at_step(3, 500).busy_line == activity.value
    assert IDLE.at_step(3, 500).busy_line is None
