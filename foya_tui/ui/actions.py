"""Provides the table of everything a user can do in the TUI, the one source of truth for keys.

Each UserAction says what it does in the user's words, its key (and where that key works), its
command-palette title and its slash command. From this table come the app's and the conversation
screen's bindings, the palette's entries, the slash commands the prompt understands, the help
screen (F1) and the README's key table (`readme_key_table`; tests/ui/test_help.py checks that the
README holds exactly that table). Keys that live on a widget or a dialog (r on a message, a in the
approval dialog) keep their Binding there; the table documents them and a test checks that the two
agree.

Binding ids are stable: `[keys]` in config.toml remaps a binding by its id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from textual.binding import Binding


class Intent(Enum):
    """What a user wants to do; the help screen is grouped by it, in this order."""

    TALK = "Talk"
    CONTEXT = "Look at the context"
    COMPACT = "Compact"
    HISTORY = "Go back in time"
    MODEL = "Switch model and approvals"
    FIND = "Find"
    APP = "Help, sessions and the app"


class BoundIn(Enum):
    """Where an action's key binding is declared."""

    APP = "app"
    """Generated from this table onto FoyaApp: works on every screen."""
    CONVERSATION = "conversation"
    """Generated from this table onto the conversation screen."""
    ELSEWHERE = "elsewhere"
    """Declared by a widget or dialog (`where` says which); the table documents it."""


class Runs(Enum):
    """What the palette and slash command run the action on."""

    APP = "app"
    CONVERSATION = "conversation"


@dataclass(frozen=True)
class Slash:
    """A slash command typed in the prompt: `/name`, `/name flag`, or `/name CHOICE`."""

    name: str
    flag: str = ""
    """A fixed word after the name that selects this action (`/compact --fallback`)."""
    choices: tuple[str, ...] = ()
    """The values of the action's one argument (`/approval ask`); passed as `{choice}`."""
    default: str | None = None
    """The choice used when none is typed (None: a choice is required)."""

    @property
    def usage(self) -> str:
        """The command as the help screen writes it: `/export [md|jsonl]`, `/approval read-only|ask|auto`."""
        text = f"/{self.name}"
        if self.flag:
            text += f" {self.flag}"
        if self.choices:
            options = "|".join(self.choices)
            text += f" [{options}]" if self.default is not None else f" {options}"
        return text


@dataclass(frozen=True)
class UserAction:
    """One thing a user can do, with every way to reach it."""

    id: str
    """The binding id (remappable in `[keys]`), or a plain name for an action without a key."""
    intent: Intent
    summary: str
    """What it does, in the user's words (help screen, README, tooltip, palette help)."""
    key: str | None = None
    """Textual key names, comma-separated (`f1,question_mark`); None: no key of its own."""
    where: str = ""
    """Where the key works when not from the conversation (`on a message`, `in the inspector`)."""
    bound_in: BoundIn = BoundIn.ELSEWHERE
    run: str | None = None
    """The Textual action the palette and slash command run (may hold `{choice}`); None: key only."""
    runs: Runs = Runs.CONVERSATION
    palette: str | None = None
    """The palette title, "noun: verb" (may hold `{choice}`: one entry per choice)."""
    slash: Slash | None = None
    label: str = ""
    """The footer's short label (bindings generated from this table only)."""
    show: bool = True
    """Whether a generated binding shows in the footer."""
    priority: bool = False
    """Whether a generated binding works even while the prompt has focus and would take the key."""
    remappable: bool = True
    """False for a key that is not a Textual binding with this id (the prompt's Enter, Textual's
    own palette key): `[keys]` cannot move it."""

    def binding(self) -> Binding:
        """The Textual binding this table declares (only for BoundIn.APP and CONVERSATION)."""
        assert self.key is not None and self.run is not None and self.bound_in is not BoundIn.ELSEWHERE
        return Binding(
            self.key,
            self.run,
            self.label or self.summary,
            show=self.show,
            priority=self.priority,
            tooltip=self.summary,
            id=self.id,
        )

    def palette_entries(self) -> tuple[tuple[str, str], ...]:
        """(title, action) pairs: one, or one per choice for a title with `{choice}`."""
        if self.palette is None or self.run is None:
            return ()
        if "{choice}" in self.palette and self.slash is not None:
            return tuple(
                (self.palette.format(choice=choice), self.run.format(choice=repr(choice)))
                for choice in self.slash.choices
            )
        return ((self.palette, self.run),)


ACTIONS: tuple[UserAction, ...] = (
    # -- talk ------------------------------------------------------------------------------------
    UserAction(
        "prompt.send", Intent.TALK, "send the message", key="enter", where="in the prompt", remappable=False
    ),
    UserAction("prompt.newline", Intent.TALK, "new line in the prompt", key="ctrl+j", where="in the prompt"),
    UserAction(
        "prompt.complete",
        Intent.TALK,
        "complete the slash command being typed (↑/↓ choose among several)",
        key="tab",
        where="in the prompt, after /",
        bound_in=BoundIn.CONVERSATION,
        run="complete_command",
        label="complete",
        show=False,
        priority=True,
    ),
    UserAction(
        "prompt.focus",
        Intent.TALK,
        "back to the prompt from anywhere in the conversation; what you typed is kept",
        key="escape",
        where="away from the prompt",
        bound_in=BoundIn.CONVERSATION,
        run="focus_prompt",
        label="back to the prompt",
        show=False,
    ),
    UserAction(
        "turn.cancel",
        Intent.TALK,
        "cancel the running reply (what already streamed is kept)",
        key="escape",
        bound_in=BoundIn.CONVERSATION,
        run="cancel_turn",
        label="cancel",
    ),
    UserAction(
        "session.new",
        Intent.TALK,
        "start a new conversation (this one stays saved)",
        run="new_session",
        runs=Runs.APP,
        palette="session: new",
        slash=Slash("new"),
    ),
    # -- the context ------------------------------------------------------------------------------
    UserAction(
        "inspector.open",
        Intent.CONTEXT,
        "the inspector: checkpoints and their segments, who made each, validity, diagnostics, "
        "fingerprints, the circuit breaker, accepted boundaries, rewound ranges",
        key="f2",
        bound_in=BoundIn.CONVERSATION,
        run="open_inspector",
        palette="inspector: open",
        slash=Slash("inspect"),
        label="inspector",
    ),
    UserAction(
        "context.show",
        Intent.CONTEXT,
        "say what the next request holds, layer by layer, against the input budget",
        run="show_context",
        palette="context: show the next request",
        slash=Slash("context"),
    ),
    UserAction(
        "message.expand",
        Intent.CONTEXT,
        "show or hide the arguments and output of the selected message's tool calls",
        key="enter",
        where="on a message",
    ),
    UserAction(
        "message.copy",
        Intent.CONTEXT,
        "copy the selected message as Markdown text",
        key="c",
        where="on a message",
    ),
    UserAction(
        "tool.toggle",
        Intent.CONTEXT,
        "expand a tool call: arguments, duration, exit code, output preview",
        key="enter",
        where="on a tool block",
    ),
    UserAction(
        "tool.open",
        Intent.CONTEXT,
        "open the full result from the session history",
        key="o",
        where="on a tool block",
    ),
    # -- compaction -------------------------------------------------------------------------------
    UserAction(
        "context.compact",
        Intent.COMPACT,
        "compact now: shows the candidate (tokens before → after, the summary, the ledger) and "
        "asks; it takes ctrl+k from the prompt (ctrl+shift+k still deletes the line)",
        key="ctrl+k",
        bound_in=BoundIn.CONVERSATION,
        run="compact",
        palette="context: compact now",
        slash=Slash("compact"),
        label="compact",
        priority=True,
    ),
    UserAction(
        "context.compact_fallback",
        Intent.COMPACT,
        "compact now without a model: recent messages kept whole, the ledger beside them",
        run="compact_without_model",
        palette="context: compact without a model (fallback)",
        slash=Slash("compact", flag="--fallback"),
    ),
    UserAction(
        "compaction.cancel",
        Intent.COMPACT,
        "cancel a running compaction (nothing is written)",
        key="escape",
        bound_in=BoundIn.CONVERSATION,
        run="cancel_compaction",
        label="cancel compaction",
    ),
    UserAction(
        "compaction.accept", Intent.COMPACT, "accept the candidate", key="a", where="in the compaction dialog"
    ),
    UserAction(
        "compaction.decline",
        Intent.COMPACT,
        "decline the candidate",
        key="d",
        where="in the compaction dialog",
    ),
    UserAction(
        "inspector.undo",
        Intent.COMPACT,
        "undo the current checkpoint: the previous one (or none) is used again; nothing is deleted",
        key="u",
        where="in the inspector",
        run="undo_compaction",
        palette="context: undo compaction",
    ),
    # -- history ----------------------------------------------------------------------------------
    UserAction(
        "message.rewind",
        Intent.HISTORY,
        "rewind to here (asks first): on a reply, history ends after it; on your message, just "
        "before it, and its text returns to the prompt",
        key="r",
        where="on a message",
        run="rewind_here",
        palette="session: rewind to here",
    ),
    UserAction(
        "session.rewind_last",
        Intent.HISTORY,
        "rewind to before your last message (asks first); its text returns to the prompt",
        run="rewind_last",
        palette="session: rewind the last message",
        slash=Slash("rewind"),
    ),
    UserAction(
        "message.fork",
        Intent.HISTORY,
        "fork here: a new session with the conversation up to this message opens; this one stays",
        key="f",
        where="on a message",
        run="fork_here",
        palette="session: fork here",
    ),
    UserAction(
        "session.fork",
        Intent.HISTORY,
        "fork the whole conversation into a new session; this one stays as it is",
        run="fork_session",
        palette="session: fork",
        slash=Slash("fork"),
    ),
    UserAction(
        "session.origin",
        Intent.HISTORY,
        "back to the session this one was forked from",
        run="open_origin",
        palette="session: back to the fork's origin",
    ),
    # -- model and approvals ------------------------------------------------------------------------
    UserAction(
        "route.switch",
        Intent.MODEL,
        "switch route (model × connection); the meter restarts from an estimate on a route without usage",
        key="ctrl+r",
        bound_in=BoundIn.CONVERSATION,
        run="switch_route",
        palette="route: switch",
        slash=Slash("model"),
        label="route",
    ),
    UserAction(
        "approval.mode",
        Intent.MODEL,
        "set what tools may do without asking: read-only, ask before writes and shell, or auto",
        run="set_approval({choice})",
        palette="approval: {choice}",
        slash=Slash("approval", choices=("read-only", "ask", "auto")),
    ),
    UserAction(
        "approval.allow_once", Intent.MODEL, "allow a tool call once", key="a", where="in the approval dialog"
    ),
    UserAction(
        "approval.allow_session",
        Intent.MODEL,
        "allow this tool for the rest of the session",
        key="s",
        where="in the approval dialog",
    ),
    UserAction("approval.deny", Intent.MODEL, "deny the call", key="d", where="in the approval dialog"),
    UserAction(
        "approval.stop", Intent.MODEL, "deny and stop the turn", key="escape", where="in the approval dialog"
    ),
    # -- find ---------------------------------------------------------------------------------------
    UserAction(
        "message.previous",
        Intent.FIND,
        "select the message above (from an empty prompt ↑ selects the newest; alt+↑ with text)",
        key="up",
        where="on a message",
    ),
    UserAction(
        "message.next",
        Intent.FIND,
        "select the message below; past the newest, back to the prompt",
        key="down",
        where="on a message",
    ),
    UserAction(
        "messages.page_up",
        Intent.FIND,
        "scroll the conversation up a page; earlier messages load as you go",
        key="pageup",
        bound_in=BoundIn.CONVERSATION,
        run="scroll_messages(-1)",
        label="page up",
        show=False,
        priority=True,
    ),
    UserAction(
        "messages.page_down",
        Intent.FIND,
        "scroll the conversation down a page",
        key="pagedown",
        bound_in=BoundIn.CONVERSATION,
        run="scroll_messages(1)",
        label="page down",
        show=False,
        priority=True,
    ),
    UserAction(
        "messages.first",
        Intent.FIND,
        "jump to the session's first message",
        key="home",
        where="in the conversation",
    ),
    UserAction(
        "messages.last",
        Intent.FIND,
        "jump to the newest message",
        key="end",
        where="in the conversation",
    ),
    UserAction(
        "inspector.search",
        Intent.FIND,
        "search the whole history; each hit says whether the model sees it verbatim or which "
        "segment summarises it",
        key="slash",
        where="in the inspector",
        run="search_history",
        palette="inspector: search history",
    ),
    UserAction(
        "inspector.sources",
        Intent.FIND,
        "list the messages a segment summarises; Enter opens one in full",
        key="s",
        where="in the inspector",
    ),
    UserAction(
        "store.repair",
        Intent.FIND,
        "rebuild the search index when it is out of date (history itself is never touched)",
        run="repair_store",
        palette="search index: rebuild",
        slash=Slash("repair"),
    ),
    UserAction(
        "output.find",
        Intent.FIND,
        "find text in a full result (Enter or n: next match)",
        key="slash,ctrl+f",
        where="in the full-result view",
    ),
    # -- help and the app ---------------------------------------------------------------------------
    UserAction(
        "help.show",
        Intent.APP,
        "this help: every key, palette command and slash command",
        key="f1,question_mark",
        bound_in=BoundIn.CONVERSATION,
        run="show_help",
        palette="help: keys and commands",
        slash=Slash("help"),
        label="help",
    ),
    UserAction(
        "app.palette",
        Intent.APP,
        "the command palette: every command by name",
        key="ctrl+p",
        remappable=False,
    ),
    UserAction(
        "sessions.browse",
        Intent.APP,
        "every session (title, model, updated, events, checkpoints, size): filter as you type, "
        "open, rename, delete, or go back to a fork's origin",
        key="ctrl+o",
        bound_in=BoundIn.CONVERSATION,
        run="browse_sessions",
        palette="session: browse sessions",
        slash=Slash("sessions"),
        label="sessions",
        show=False,
        priority=True,
    ),
    UserAction(
        "sessions.open",
        Intent.APP,
        "open the highlighted session",
        key="enter",
        where="in the sessions browser",
    ),
    UserAction(
        "sessions.rename",
        Intent.APP,
        "rename the highlighted session",
        key="f2",
        where="in the sessions browser",
    ),
    UserAction(
        "sessions.delete",
        Intent.APP,
        "delete the highlighted session and everything stored for it (asks first; never the open one)",
        key="delete",
        where="in the sessions browser",
    ),
    UserAction(
        "sessions.origin",
        Intent.APP,
        "open the session the highlighted one was forked from",
        key="ctrl+b",
        where="in the sessions browser",
    ),
    UserAction(
        "session.export_md",
        Intent.APP,
        "write the conversation as a Markdown transcript to a new file in the working directory",
        run="export_markdown",
        palette="session: export as Markdown",
        slash=Slash("export", choices=("md",), default="md"),
    ),
    UserAction(
        "theme.toggle",
        Intent.APP,
        "switch between the dark and the light theme",
        run="toggle_theme",
        runs=Runs.APP,
        palette="theme: toggle dark/light",
        slash=Slash("theme"),
    ),
    UserAction(
        "theme.choose",
        Intent.APP,
        "pick any installed theme",
        run="change_theme",
        runs=Runs.APP,
        palette="theme: choose",
    ),
    UserAction(
        "screen.screenshot",
        Intent.APP,
        "save an SVG screenshot of the screen",
        run="save_screenshot",
        runs=Runs.APP,
        palette="screen: save screenshot",
    ),
    UserAction(
        "app.quit",
        Intent.APP,
        "quit (everything is already saved)",
        key="ctrl+q",
        bound_in=BoundIn.APP,
        run="quit",
        runs=Runs.APP,
        palette="app: quit",
        slash=Slash("quit"),
        label="quit",
        priority=True,
    ),
)
"""Every user action, grouped by intent in the order the help screen shows them."""


def bindings_of(bound_in: BoundIn) -> list[Binding]:
    """The bindings the table declares for the app or the conversation screen."""
    return [action.binding() for action in ACTIONS if action.bound_in is bound_in]


KEY_NAMES = {
    "question_mark": "?",
    "slash": "/",
    "escape": "Esc",
    "enter": "Enter",
    "tab": "Tab",
    "up": "↑",
    "down": "↓",
    "pageup": "PageUp",
    "pagedown": "PageDown",
    "home": "Home",
    "end": "End",
    "delete": "Del",
}


def key_text(keys: str) -> str:
    """Textual key names as a user reads them: `f1,question_mark` → `F1 / ?`."""
    names = []
    for key in keys.split(","):
        key = key.strip()
        if key in KEY_NAMES:
            names.append(KEY_NAMES[key])
        elif len(key) > 1 and key[0] == "f" and key[1:].isdigit():
            names.append(key.upper())
        else:
            names.append(key)
    return " / ".join(names)


def key_line(action: UserAction, keys: str | None = None) -> str:
    """The key column: the key and where it works (`r on a message`), or "" without a key."""
    keys = keys if keys is not None else action.key
    if not keys:
        return ""
    text = key_text(keys)
    return f"{text} {action.where}" if action.where else text


def palette_line(action: UserAction) -> str:
    """The palette column: its title, or the titles of its choices joined."""
    if action.palette is None:
        return ""
    if "{choice}" in action.palette and action.slash is not None:
        return action.palette.format(choice="|".join(action.slash.choices))
    return action.palette


def readme_key_table() -> str:
    """The README's key table (Markdown), generated from ACTIONS with the default keys."""
    lines = ["| key | palette | slash | what it does |", "|---|---|---|---|"]
    for intent in Intent:
        lines.append(f"| **{intent.value}** | | | |")
        for action in ACTIONS:
            if action.intent is not intent:
                continue
            key = f"`{key_text(action.key)}`" if action.key else ""
            if key and action.where:
                key += f" {action.where}"
            palette = palette_line(action)
            slash = action.slash.usage if action.slash else ""
            cells = [key, f"`{palette}`" if palette else "", f"`{slash}`" if slash else "", action.summary]
            # A pipe inside a cell (`md|jsonl`) is escaped, or it would end the cell.
            escaped = [cell.replace("|", "\\|") for cell in cells]
            lines.append("| " + " | ".join(escaped) + " |")
    return "\n".join(lines) + "\n"


# -- slash commands ----------------------------------------------------------------------------

COMMAND_WORD = re.compile(r"/([A-Za-z][\w-]*)(?=\s|$)")
"""A slash command's first word; text like `/etc/hosts?` is not one and is sent as typed."""


@dataclass(frozen=True)
class SendText:
    """The submission is a message for the model (`//x` sends `/x`)."""

    text: str


@dataclass(frozen=True)
class RunAction:
    """The submission is a slash command: run `run` (a Textual action string) on `action.runs`."""

    action: UserAction
    run: str


@dataclass(frozen=True)
class SlashProblem:
    """The submission looks like a slash command but is not one; nothing is sent."""

    reason: str


def read_submission(text: str) -> SendText | RunAction | SlashProblem:
    """What pressing Enter on `text` means: a message, a slash command, or a mistyped command."""
    stripped = text.strip()
    if stripped.startswith("//"):
        return SendText(stripped[1:])
    match = COMMAND_WORD.match(stripped)
    if match is None:
        return SendText(text)
    name = match.group(1).lower()
    words = stripped[match.end() :].split()
    candidates = [a for a in ACTIONS if a.slash is not None and a.slash.name == name]
    if not candidates:
        return SlashProblem(
            f"Unknown command /{name}. /help lists the commands; // sends a message that starts with /."
        )
    for action in candidates:
        slash, run = action.slash, action.run
        assert slash is not None and run is not None
        if slash.flag:
            if words == [slash.flag]:
                return RunAction(action, run)
        elif slash.choices:
            chosen = words[0] if len(words) == 1 else slash.default if not words else None
            if chosen in slash.choices:
                return RunAction(action, run.format(choice=repr(chosen)))
        elif not words:
            return RunAction(action, run)
    usages = " or ".join(a.slash.usage for a in candidates if a.slash is not None)
    return SlashProblem(f"Usage: {usages}")


def slash_completions(text: str) -> tuple[tuple[str, UserAction], ...]:
    """The commands `text` (a prompt's text being typed) may become, each with its action."""
    if "\n" in text or not text.startswith("/") or text.startswith("//"):
        return ()
    typed = text.lower()
    found: list[tuple[str, UserAction]] = []
    for action in ACTIONS:
        slash = action.slash
        if slash is None:
            continue
        forms = [f"/{slash.name} {slash.flag}"] if slash.flag else []
        if slash.choices:
            forms = ([f"/{slash.name}"] if slash.default is not None else []) + [
                f"/{slash.name} {choice}" for choice in slash.choices
            ]
        elif not slash.flag:
            forms = [f"/{slash.name}"]
        found += [(form, action) for form in forms if form.startswith(typed) and form != typed]
    return tuple(found)
