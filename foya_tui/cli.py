"""Provides the `foya` command line: the TUI by default, and headless sub-commands (DESIGN §5).

User mistakes (bad flags, unknown sessions, malformed files, bad config) print one sentence on
stderr and exit with code 2; nothing is written. Provider failures exit with code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from foya_tui import __version__
from foya_tui.errors import EXIT_FAILED, EXIT_OK, FoyaError, InputError
from foya_tui.runtime.text import split_escape_tail, terminal_safe
from foya_tui.settings import APPROVAL_MODES

if TYPE_CHECKING:
    from foya_tui.runtime.context.report import ContextReport


class UsageError(InputError):
    """A mistake on the command line itself (a flag, an empty prompt, an unreadable file)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the whole usage block; one clear line is kinder in scripts.
        raise UsageError(f"{message} (see `foya --help`)")


def build_parser() -> argparse.ArgumentParser:
    from foya_tui.paths import resolve_paths

    paths = resolve_paths()
    parser = _Parser(
        prog="foya",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "A terminal workstation for long LLM-agent sessions.\n\n"
            "Plain `foya` (no command) opens the TUI on a new conversation; `foya --session ID`\n"
            "resumes one. In the TUI, F1 shows every key, palette command and slash command."
        ),
        epilog=(
            "files:\n"
            f"  config    {paths.config_file}\n"
            f"  database  {paths.database}\n"
            "  `foya config` prints every setting in force; `foya config edit` opens the file\n\n"
            "environment:\n"
            "  FOYA_HOME        one folder for the config and the database\n"
            "  FOYA_MODEL       the model to use, overriding the config's `model`\n"
            "  FOYA_THEME       the TUI theme, overriding the config's `theme`\n"
            "  FOYA_SIM_FAULTS  makes the offline simulator fail on purpose (to try failures out)"
        ),
    )
    parser.add_argument("--version", action="version", version=f"foya {__version__}")
    parser.add_argument(
        "--db", metavar="PATH", help="database file (default: under the data dir or $FOYA_HOME)"
    )
    parser.add_argument(
        "--model", metavar="M", help="LiteLLM model string for this run (default from config)"
    )
    parser.add_argument("--session", metavar="ID", help="resume this session in the TUI (id or prefix)")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)

    run = commands.add_parser("run", help="run one headless turn")
    run.add_argument("prompt", help="the message to send; '-' reads it from stdin")
    run.add_argument("--model", dest="run_model", metavar="M", help="LiteLLM model string")
    run.add_argument("--session", dest="run_session", metavar="ID", help="continue this session")
    run.add_argument("--json", action="store_true", help="print runtime updates as JSON lines")
    run.add_argument(
        "--approval",
        choices=APPROVAL_MODES,
        help="what tools may do: read-only, ask (refused headless: nobody can answer), auto",
    )

    sessions = commands.add_parser("sessions", help="list sessions; `rm` and `rename` change one")
    sessions.add_argument("--json", action="store_true", help="print JSON")
    changes = sessions.add_subparsers(dest="sessions_command", parser_class=_Parser, metavar="{rm,rename}")
    remove = changes.add_parser("rm", help="delete a session and everything stored for it")
    remove.add_argument("session", metavar="ID")
    remove.add_argument("--yes", action="store_true", help="do not ask first (needed without a terminal)")
    remove.add_argument("--json", action="store_true", help="print JSON")
    rename = changes.add_parser("rename", help="give a session a new title")
    rename.add_argument("session", metavar="ID")
    rename.add_argument("title", metavar="TITLE")
    rename.add_argument("--json", action="store_true", help="print JSON")

    importer = commands.add_parser("import", help="import OpenAI-format messages (JSON array or JSONL)")
    importer.add_argument("file", help="transcript file; '-' reads stdin")

    export = commands.add_parser("export", help="print a session as JSON lines, or as Markdown")
    export.add_argument("session", metavar="SESSION")
    export.add_argument(
        "--format",
        choices=("jsonl", "md"),
        default="jsonl",
        help="jsonl: every event (default); md: a readable transcript of the valid history",
    )
    export.add_argument(
        "--projection", action="store_true", help="the compiled messages the model would see, not the history"
    )
    export.add_argument(
        "--model", dest="sub_model", metavar="M", help="compile the projection for this model"
    )

    context = commands.add_parser("context", help="compile the next request without sending it")
    context.add_argument("session", metavar="SESSION")
    context.add_argument("--model", dest="sub_model", metavar="M", help="compile for this model's route")
    context.add_argument("--json", action="store_true", help="print JSON")

    compact = commands.add_parser("compact", help="compact an idle session now (standalone)")
    compact.add_argument("session", metavar="SESSION")
    compact.add_argument("--model", dest="sub_model", metavar="M", help="summarise on this model's route")
    compact.add_argument("--json", action="store_true", help="print JSON")
    compact.add_argument(
        "--fallback",
        action="store_true",
        help="make the deterministic fallback checkpoint, without asking any model",
    )

    inspect = commands.add_parser("inspect", help="checkpoints, segments, diagnostics, fingerprints")
    inspect.add_argument("session", metavar="SESSION")
    inspect.add_argument("--json", action="store_true", help="print JSON")

    verify = commands.add_parser("verify", help="re-validate a session's store and checkpoints")
    verify.add_argument("session", metavar="SESSION")
    verify.add_argument(
        "--repair",
        action="store_true",
        help="rebuild a damaged search index, recreate missing triggers (events are never touched)",
    )

    search = commands.add_parser("search", help="search a session's whole valid history")
    search.add_argument("session", metavar="SESSION")
    search.add_argument("query", metavar="QUERY", help='words (all must match) and "phrases"')
    search.add_argument("--limit", type=int, default=50, help="most hits (default 50)")
    search.add_argument("--json", action="store_true", help="print JSON")

    rewind = commands.add_parser("rewind", help="make history after SEQ invalid (nothing is deleted)")
    rewind.add_argument("session", metavar="SESSION")
    rewind.add_argument("seq", type=int, metavar="SEQ", help="the last event that stays valid (0: all)")

    fork = commands.add_parser("fork", help="start a new session from a session's valid history")
    fork.add_argument("session", metavar="SESSION")
    fork.add_argument(
        "--at", type=int, metavar="SEQ", help="the last event the fork keeps (default: the end)"
    )
    fork.add_argument("--json", action="store_true", help="print JSON")

    config = commands.add_parser(
        "config", help="where config.toml and the database are, and every setting in force"
    )
    config.add_argument("--json", action="store_true", help="print JSON")
    config_commands = config.add_subparsers(dest="config_command", parser_class=_Parser)
    config_commands.add_parser(
        "edit", help="open config.toml in $EDITOR (or $VISUAL), made from a commented template when missing"
    )
    return parser


def _preflight(args: argparse.Namespace, model: str | None) -> None:
    """The route check of `Runtime.check_route`, before the runtime (its imports, its database)
    is opened: an unknown model or a missing key is one line in well under a second."""
    from foya_tui.paths import resolve_paths
    from foya_tui.runtime.providers.preflight import check_route
    from foya_tui.runtime.providers.routes import route_for
    from foya_tui.settings import load_settings

    settings = load_settings(resolve_paths(database=args.db).config_file)
    check_route(settings, route_for(settings, model))


def _open_runtime(args: argparse.Namespace, *, read_only: bool | None = False):
    """The runtime of a command; `read_only` for commands that only read (they open the database
    without its write lock: a running import or turn never blocks them, nor they it). None: for
    commands that read and may rebuild a damaged checkpoint row (SPEC P-3: `context`, `export
    --projection`): read-write where the database's directory can be written, else read-only
    (the rebuilt row is then used without being stored)."""
    from foya_tui.paths import resolve_paths
    from foya_tui.progress import index_progress
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.settings import load_settings

    paths = resolve_paths(database=args.db)
    if read_only is None:
        read_only = paths.database.is_file() and not os.access(paths.database.parent, os.W_OK)
    settings = load_settings(paths.config_file)
    return Runtime(
        settings,
        paths,
        approval_mode=getattr(args, "approval", None),
        migration_progress=index_progress,
        read_only=read_only,
    )


def import_progress(done: int, total: int) -> None:
    """Progress of a large import, batch by batch, on stderr."""
    say(f"foya: importing: {done:,} of {total:,} messages", err=True)


def index_progress(done: int, total: int) -> None:
    """Progress of a large import's search index, written in batches after its rows, on stderr."""
    say(f"foya: indexing for search: {done:,} of {total:,} messages", err=True)


# json.dumps escapes U+0000..U+001F but writes DEL, the C1 controls (U+009B is an 8-bit CSI some
# terminals obey), bidi overrides, line separators and lone surrogates raw (a lone surrogate cannot
# even be written as UTF-8). Outside strings JSON is ASCII, so escaping these keeps the value and
# makes the bytes terminal-safe.
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _print_json(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)
    sys.stdout.write(_JSON_UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", text) + "\n")
    sys.stdout.flush()


def say(*parts: object, sep: str = " ", end: str = "\n", err: bool = False) -> None:
    """Print plain output (stdout, or stderr with `err`): every character passes `terminal_safe`,
    so model text, tool names and arguments, titles and snippets cannot command the terminal.
    Everything the CLI prints outside `--json` goes through here."""
    stream = sys.stderr if err else sys.stdout
    stream.write(terminal_safe(sep.join(str(part) for part in parts) + end))
    stream.flush()


class _SafeStream:
    """Streamed reply text for the terminal: a sequence split across two deltas is held back until
    it can be removed whole (the TUI's stream does the same)."""

    def __init__(self) -> None:
        self._held = ""

    def write(self, fragment: str) -> None:
        ready, self._held = split_escape_tail(self._held + fragment)
        if ready:
            say(ready, end="")

    def finish(self) -> None:
        if self._held:
            say(self._held, end="")
            self._held = ""


def _start_provider_import() -> None:
    """Start importing LiteLLM in the background (seconds; more on a loaded machine) while this run
    reads its prompt, opens the database and compiles its first request; the first request waits
    for what is left of it.

    The run's own modules are imported first, here: one package imported by two threads at once
    can be seen half-initialised, and LiteLLM's import shares packages with the run's (tiktoken,
    much of the standard library). `tests/runtime/test_cli_warm_up.py` checks that nothing the run
    imports later is part of LiteLLM's import."""
    import importlib

    from foya_tui.runtime.providers.litellm_client import warm_up
    from foya_tui.runtime.tokens import import_tokenizer

    for module in ("foya_tui.runtime.runtime", "foya_tui.cli_json", "foya_tui.progress"):
        importlib.import_module(module)
    import_tokenizer()
    warm_up()


def _cmd_run(args: argparse.Namespace, *, background_import: bool = False) -> int:
    """One headless turn. The route is checked first (milliseconds, without LiteLLM for every
    common provider), so that a model string or key that cannot work fails at once; with
    `background_import`, LiteLLM's import then runs while the prompt is read (stdin may be a slow
    pipe), the database opened and the first request compiled."""
    if args.run_model or args.model or not args.run_session:
        _preflight(args, args.run_model or args.model)
    if background_import:
        _start_provider_import()
    prompt = _read_stdin_text("the prompt") if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    with _open_runtime(args) as runtime:
        route = runtime.route_for(args.run_model or args.model)
        session = (
            runtime.open_session(args.run_session, route) if args.run_session else runtime.new_session(route)
        )
        with runtime.claim(session.id):
            return _run_turn(args, session, prompt)


def _read_stdin_text(what: str) -> str:
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        byte = data[exc.start]
        raise UsageError(f"{what} on stdin is not valid UTF-8 (byte {byte:#04x} at {exc.start})") from None


def _run_turn(args: argparse.Namespace, session, prompt: str) -> int:
    """Send one prompt and print its updates (the caller holds the session's lease)."""
    from foya_tui.cli_json import update_json
    from foya_tui.runtime.updates import (
        CompactionFinished,
        CompactionProgressed,
        ContextSnipped,
        HandoffRecorded,
        ReplyDelta,
        RetryScheduled,
        ToolCallFinished,
        ToolCallStarted,
        TurnFailed,
        TurnFinished,
    )

    status = EXIT_FAILED
    reply = _SafeStream()
    for update in session.send(prompt):
        if not isinstance(update, ReplyDelta):
            reply.finish()
        if args.json:
            _print_json(update_json(update))
        elif isinstance(update, ReplyDelta):
            reply.write(update.text)
        elif isinstance(update, ToolCallStarted):
            say(f"foya: ▸ {update.name} {update.arguments}", err=True)
        elif isinstance(update, ToolCallFinished):
            mark = "✗" if update.is_error else "✓"
            say(f"foya:   {mark} {update.name}: {len(update.content):,} characters", err=True)
        elif isinstance(update, RetryScheduled):
            say(f"foya: {update.reason}; retrying in {update.delay_seconds:.1f} s", err=True)
        elif isinstance(update, TurnFinished):
            say("")
            if update.notice:
                say(f"foya: {update.notice}", err=True)
        elif isinstance(update, TurnFailed):
            say(f"foya: {update.reason}", err=True)
        elif isinstance(update, CompactionProgressed):
            detail = f" {update.detail}" if update.detail else ""
            say(f"foya: compaction ({update.trigger}): {update.stage}{detail}…", err=True)
        elif isinstance(update, CompactionFinished):
            say(f"foya: compaction {update.result.outcome}: {update.result.reason}", err=True)
        elif isinstance(update, ContextSnipped):
            say(
                f"foya: {update.mode}: {update.results} old tool result(s) left the model's view "
                f"(−{update.tokens_saved:,} tokens; history keeps them)",
                err=True,
            )
        elif isinstance(update, HandoffRecorded):
            say("foya: handoff band: the model was asked to record where it stands", err=True)
        if isinstance(update, TurnFinished):
            status = EXIT_OK
    return status


def _cmd_sessions(args: argparse.Namespace) -> int:
    if args.sessions_command == "rm":
        return _cmd_sessions_rm(args)
    if args.sessions_command == "rename":
        return _cmd_sessions_rename(args)
    from foya_tui.cli_json import session_json

    with _open_runtime(args, read_only=True) as runtime:
        sessions = runtime.session_overviews()
    if args.json:
        _print_json({"sessions": [session_json(overview) for overview in sessions]})
        return EXIT_OK
    if not sessions:
        say('no sessions yet: run `foya` or `foya run "hello"`')
        return EXIT_OK
    for overview in sessions:
        s = overview.info
        status = f"  ({overview.status})" if overview.status else ""
        updated = s.updated_at[:19].replace("T", " ")
        say(f"{s.short_id}  {updated}  {s.event_count:>6} events  {s.title}{status}")
    return EXIT_OK


def _confirm(question: str) -> bool:
    """Ask on the terminal; only "y" or "yes" agrees (a closed stdin says no)."""
    say(f"{question} [y/N] ", end="", err=True)
    try:
        answer = sys.stdin.readline()
    except OSError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _cmd_sessions_rm(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        info = runtime.find_session(args.session)
        if not args.yes:
            if not sys.stdin.isatty():
                raise UsageError(f"deleting session {info.short_id} cannot be undone: add --yes to confirm")
            title = f" ({info.title})" if info.title else ""
            if not _confirm(f"Delete session {info.short_id}{title}, {info.event_count:,} events?"):
                say("nothing was deleted", err=True)
                return EXIT_OK
        deleted = runtime.delete_session(info.id)
    if args.json:
        _print_json({"deleted": deleted.info.id, "events": deleted.events})
    else:
        say(f"deleted session {deleted.info.short_id} ({deleted.events:,} events)")
    return EXIT_OK


def _cmd_sessions_rename(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        info = runtime.rename_session(args.session, args.title)
    if args.json:
        _print_json({"id": info.id, "title": info.title})
    else:
        say(f"session {info.short_id} is now titled: {info.title}")
    return EXIT_OK


def _cmd_import(args: argparse.Namespace) -> int:
    from foya_tui.runtime.transcripts import read_transcript

    with _open_runtime(args) as runtime:
        limit = runtime.settings.import_max_bytes
        if args.file == "-":
            data, source = read_transcript(sys.stdin.buffer, limit), "stdin"
            info = runtime.import_transcript(
                data, source, progress=import_progress, index_progress=index_progress
            )
        else:
            # Read a piece at a time, twice (validated, then imported): never the whole file at once.
            try:
                info = runtime.import_transcript_file(
                    Path(args.file), progress=import_progress, index_progress=index_progress
                )
            except OSError as exc:
                raise UsageError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    say(info.id)
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    if args.format == "md":
        if args.projection:
            raise UsageError("--projection prints the model's messages as JSON; it has no Markdown form")
        with _open_runtime(args, read_only=True) as runtime:
            text = runtime.export_markdown(args.session)
        say(text, end="")
        return EXIT_OK
    with _open_runtime(args, read_only=None if args.projection else True) as runtime:
        model = args.sub_model or args.model
        route = runtime.route_for(model) if model else None
        for record in runtime.export(args.session, projection=args.projection, route=route):
            _print_json(record)
    return EXIT_OK


def _cmd_context(args: argparse.Namespace) -> int:
    with _open_runtime(args, read_only=None) as runtime:
        model = args.sub_model or args.model
        report = runtime.context(args.session, runtime.route_for(model) if model else None).report()
    if args.json:
        from foya_tui.cli_json import json_of

        _print_json(json_of(report))
        return EXIT_OK
    say(format_context(report))
    return EXIT_OK


def format_context(report: ContextReport) -> str:
    """The human form of `foya context`: layers, budget lines, estimate and its source."""
    from foya_tui.runtime.view.handoff import EpochStatus

    route = report.route
    window = f"{report.window:,}" if report.window else "unknown"
    estimate = report.estimate
    exactness = "counted with " + report.counter if report.counted_exactly else "estimated (no tokenizer)"
    lines = [
        f"session {report.session[:6]} · {route.model}{' (simulator)' if route.simulator else ''}"
        f" · connection {route.connection} · route {route.id}",
        f"window {window} ({report.window_source}) · output reserve {report.output_reserve:,}"
        f" ({report.reserve_basis}) · input budget {report.input_budget:,}",
        "",
        f"layers ({exactness}):",
    ]
    for name, tokens in report.layers.as_dict().items():
        lines.append(f"  {name.replace('_', ' '):<13}{tokens:>10,}")
        if name == "tool_schema" and report.brief_tools:
            lines[-1] += "   brief descriptions: the window is small"
    lines += [
        "",
        f"next request  {estimate.total:>10,}  {estimate.source}: {estimate.reason}",
        f"handoff at    {report.handoff_at:>10,}",
        f"compact at    {report.high_water:>10,}",
        f"verdict       {report.verdict:>10}   ({report.messages} messages through seq {report.through_seq})",
    ]
    checkpoint = report.checkpoint
    if checkpoint:
        lines.append(
            f"checkpoint    {checkpoint.id[:12]}  L{checkpoint.level}"
            f" · {checkpoint.segments} segment(s) · covers through seq {checkpoint.through_seq}"
            f" ({checkpoint.phase}, {checkpoint.producer})"
        )
    native = report.native
    if native:
        sent = "sent with this request" if native.sent else "not sent: it belongs to another route"
        lines.append(f"native state  {native.checkpoint_id[:12]} of {native.bound_model}, {sent}")
    snipped = report.snipped
    if snipped.count:
        lines.append(
            f"snipped       {snipped.count:>10,} old tool result(s) shown as placeholders"
            f" (−{snipped.tokens_saved:,} tokens)"
        )
    handoff = report.handoff
    if handoff.status is not EpochStatus.NONE:
        lines.append(f"handoff       {handoff.status:>10} for this epoch")
    if not report.snapshot_known:
        lines.append("token count   unknown window and no usage yet: no handoff or LLM compaction")
    lines += [f"note: {notice}" for notice in report.notices]
    return "\n".join(lines)


def _cmd_compact(args: argparse.Namespace) -> int:
    from foya_tui.cli_json import compaction_json
    from foya_tui.runtime.compaction.failures import Outcome

    with _open_runtime(args) as runtime, runtime.claim(runtime.find_session(args.session).id):
        model = args.sub_model or args.model
        progress = None
        if not args.json:
            progress = lambda stage, detail: say(  # noqa: E731 - one line, only here
                f"foya: {stage}{' ' + detail if detail else ''}…", err=True
            )
        route = runtime.route_for(model) if model else None
        result = runtime.compact(args.session, route, progress=progress, use_model=not args.fallback)
        offer = None if args.fallback else runtime.fallback_offer(args.session, route, result)
    report = compaction_json(result)
    if offer is not None:
        report["fallback_offer"] = {"tokens_before": offer.tokens_before, "tokens_after": offer.tokens_after}
    if args.json:
        _print_json(report)
    else:
        after = f" → {result.tokens_after:,}" if result.tokens_after is not None else ""
        checkpoint = f" · checkpoint {result.checkpoint.id[:12]}" if result.checkpoint is not None else ""
        line = f"{result.outcome}: {result.tokens_before:,}{after} tokens{checkpoint} · {result.reason}"
        if offer is not None:
            line += (
                f" · --fallback would make a checkpoint without a model: "
                f"{offer.tokens_before:,} → {offer.tokens_after:,} tokens"
            )
        say(line)
    return EXIT_OK if result.outcome in (Outcome.ACCEPTED, Outcome.NOTHING_TO_COMPACT) else EXIT_FAILED


def _cmd_inspect(args: argparse.Namespace) -> int:
    from foya_tui.cli_json import inspect_json

    with _open_runtime(args, read_only=True) as runtime:
        report = runtime.inspect(args.session)
    if args.json:
        _print_json(inspect_json(report))
        return EXIT_OK
    say(format_inspect(inspect_json(report)))
    return EXIT_OK


def format_inspect(report: dict) -> str:
    """The human form of `foya inspect`: lineage with segments, then diagnostics and fingerprints."""
    lines = [f"session {report['session'][:6]}", "", "checkpoints (newest last):"]
    if not report["checkpoints"]:
        lines.append("  (none: the model sees all valid history)")
    for checkpoint in report["checkpoints"]:
        mark = "●" if checkpoint["current"] else "○"
        if "segments" not in checkpoint:
            lines.append(f"  {mark} {checkpoint['id'][:12]}  invalid: {checkpoint['problem']}")
            continue
        state = checkpoint["status"]
        if checkpoint["problem"]:
            state += f" ({checkpoint['problem']})"
        lines.append(
            f"  {mark} {checkpoint['id'][:12]}  {state}  L{checkpoint['level']}  {checkpoint['phase']}"
            f"  through seq {checkpoint['through_seq']}  {checkpoint['tokens_before']:,} → "
            f"{checkpoint['tokens_after']:,} tokens  {checkpoint['producer']}  {checkpoint['model']}"
        )
        if checkpoint["native_state_bytes"] is not None:
            size = checkpoint["native_state_bytes"]
            lines.append(f"      native state {size:,} bytes, bound to this checkpoint's model")
        if checkpoint["kept_messages"]:
            lines.append(f"      {checkpoint['kept_messages']} message(s) kept verbatim")
        for segment in checkpoint["segments"]:
            lines.append(
                f"      seg {segment['index']}  seq {segment['from_seq']}–{segment['through_seq']}"
                f"  L{segment['level']}  {segment['tokens']:,} tokens"
            )
    lines += ["", "diagnostics:"]
    for diagnostic in report["diagnostics"] or [{"seq": None}]:
        if diagnostic["seq"] is None:
            lines.append("  (none)")
            break
        after = diagnostic["tokens_after"]
        sizes = f"{diagnostic['tokens_before']:,}" + (f" → {after:,}" if after is not None else "")
        lines.append(
            f"  seq {diagnostic['seq']}  {diagnostic['trigger']}  {diagnostic['phase'] or '-'}"
            f"  {diagnostic.get('producer') or '-'}  {diagnostic['outcome']}  {sizes}  {diagnostic['reason']}"
        )
    breaker = report.get("breaker")
    if breaker is not None:
        state = (
            f"open after {breaker['failures']} consecutive summariser failures: automatic compactions "
            "use the deterministic fallback; a manual compaction tries the summariser again"
            if breaker["state"] == "open"
            else f"closed ({breaker['failures']} of {breaker['threshold']} consecutive failures)"
        )
        lines += ["", f"circuit breaker: {state}"]
        lines += [f"  {reason}" for reason in breaker["reasons"]]
    lines += ["", "fingerprints:"]
    lines += [f"  {f['fingerprint'][:12]}  {f['reason']}" for f in report["fingerprints"]] or ["  (none)"]
    lines += ["", "accepted boundaries:"]
    lines += [
        f"  route {b['route']}  through seq {b['through_seq']}  input {b['input_tokens']}  "
        f"{b['payload_bytes']:,} bytes"
        for b in report["accepted_boundaries"]
    ] or ["  (none)"]
    if report["rewound"]:
        lines += ["", "rewound ranges:"]
        lines += [
            f"  seq {r['from_seq']}–{r['through_seq']} (rewind at {r['rewind_seq']})"
            for r in report["rewound"]
        ]
    lines += [f"note: {notice}" for notice in report["notices"]]
    return "\n".join(lines)


def _cmd_verify(args: argparse.Namespace) -> int:
    # Without --repair nothing is written: the database is opened read-only (it works on a
    # read-only mount, and never waits for a writer).
    with _open_runtime(args, read_only=not args.repair) as runtime:
        report = runtime.verify(args.session)
        say("\n".join(report.lines()))
        if not args.repair or report.ok:
            return EXIT_OK if report.ok else EXIT_FAILED
        from foya_tui.progress import index_progress

        actions = runtime.repair(args.session, progress=index_progress)
        lines = [f"repaired: {action}" for action in actions] or ["repaired: nothing the store can repair"]
        say("\n".join(lines))
        report = runtime.verify(args.session)
        say("\n".join(report.lines()))
    return EXIT_OK if report.ok else EXIT_FAILED


def _cmd_search(args: argparse.Namespace) -> int:
    from foya_tui.cli_json import json_of

    with _open_runtime(args, read_only=True) as runtime:
        hits = runtime.search(args.session, args.query, limit=args.limit)
    if args.json:
        _print_json({"hits": json_of(hits)})
        return EXIT_OK
    if not hits:
        say(f"no events match {args.query!r}")
    for hit in hits:
        covered = hit.covered_by
        where = (
            f"  (summarised: checkpoint {covered.checkpoint_id[:12]} seg {covered.segment})"
            if covered
            else ""
        )
        say(f"seq {hit.seq:>6}  {hit.role or hit.kind:<9} {hit.snippet}{where}")
    return EXIT_OK


def _cmd_rewind(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime, runtime.claim(runtime.find_session(args.session).id):
        seq = runtime.rewind(args.session, args.seq)
    say(f"rewound to seq {args.seq} (rewind event {seq}); later events stay in canonical history")
    return EXIT_OK


def _cmd_fork(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        forked = runtime.fork(args.session, args.at)
    info = forked.info
    if args.json:
        _print_json(
            {"session": info.id, "from": forked.source_id, "at": forked.at_seq, "messages": info.event_count}
        )
    else:
        say(info.id)
    return EXIT_OK


def _cmd_config(args: argparse.Namespace) -> int:
    from foya_tui.paths import resolve_paths
    from foya_tui.settings import load_settings

    paths = resolve_paths(database=args.db)
    if args.config_command == "edit":
        return _edit_config(paths.config_file)
    from foya_tui.cli_json import config_json

    report = config_json(paths, load_settings(paths.config_file), os.environ)
    if args.json:
        _print_json(report)
    else:
        say(format_config(report))
    return EXIT_OK


def format_config(report: dict) -> str:
    """The human form of `foya config`: the two paths, then the settings in force as TOML (which
    could be pasted into config.toml), a key named by its variable only."""
    import tomlkit

    missing = "  (none yet: `foya config edit` makes it)"
    config = report["config"] + ("" if report["config_exists"] else missing)
    database = report["database"] + ("" if report["database_exists"] else "  (made on first use)")
    overrides = ", ".join(f"{setting} from {name}" for name, setting in report["environment"].items())
    lines = [
        f"config    {config}",
        f"database  {database}",
        "",
        f"# settings in force{f' ({overrides})' if overrides else ''}: the file, over the defaults",
    ]

    def table(values: dict) -> tomlkit.items.Table | tomlkit.TOMLDocument:
        made = tomlkit.document() if values is report["settings"] else tomlkit.table()
        # Values before tables: in TOML, a key after a table header belongs to that table.
        for key, value in sorted(values.items(), key=lambda item: isinstance(item[1], dict)):
            if key == "api_key_set" or value == {}:
                continue
            if value is None:
                made.add(tomlkit.comment(f"{key}: not set"))
            elif isinstance(value, dict):
                made.add(key, table(value))
            else:
                made.add(key, value)
        if values.get("api_key_set") is not None:
            said = "set" if values["api_key_set"] else "NOT set"
            made["api_key_env"].comment(f"the key: {said} in the environment (never shown)")
        return made

    lines.append(tomlkit.dumps(table(report["settings"])).rstrip("\n"))
    return "\n".join(lines)


def _edit_config(config_file: Path) -> int:
    """`foya config edit`: $EDITOR (or $VISUAL) on config.toml, made from the commented template
    when missing; afterwards the file is checked, so a mistake is said now, not at the next start."""
    import shlex
    import subprocess

    from foya_tui.config_file import ensure_config_file
    from foya_tui.settings import SettingsError, load_settings

    editor = os.environ.get("EDITOR") or os.environ.get("VISUAL")
    if not editor or not shlex.split(editor):
        raise UsageError(f"no editor: set $EDITOR (for example EDITOR=nano), or open {config_file} yourself")
    if ensure_config_file(config_file):
        say(f"foya: made {config_file} from the commented template", err=True)
    try:
        code = subprocess.call([*shlex.split(editor), str(config_file)])
    except OSError as exc:
        raise FoyaError(f"the editor {editor!r} could not be started: {exc.strerror or exc}") from None
    if code != 0:
        raise FoyaError(f"the editor {editor!r} ended with exit code {code}")
    try:
        load_settings(config_file)
    except SettingsError as exc:
        say(f"foya: {exc.message}; `foya config edit` opens it again", err=True)
        return EXIT_FAILED
    say(f"{config_file}: valid")
    return EXIT_OK


def _cmd_tui(args: argparse.Namespace) -> int:
    from foya_tui.ui.app import run_app

    return run_app(database=args.db, model=args.model, session=args.session)


def _check_arguments(argv: Sequence[str]) -> None:
    """Refuse arguments that are not valid UTF-8 before anything runs: Python keeps undecodable
    bytes as lone surrogates, which SQLite and the terminal cannot take (a prompt would be stored,
    then fail; an id would print `utf-8`)."""
    for number, argument in enumerate(argv, 1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError as exc:
            byte = argument.encode("utf-8", "surrogateescape")[exc.start : exc.start + 1] or b"?"
            raise UsageError(
                f"argument {number} is not valid UTF-8 (byte {byte[0]:#04x} at position {exc.start}); "
                "pass text in UTF-8, or a prompt on stdin with `-`"
            ) from None


def _exit_now(code: int) -> NoReturn:
    """End `foya run`, or the TUI once the user quit, as soon as the output is out. LiteLLM hands
    each reply to its logging thread pool (cost bookkeeping nobody reads here), and the interpreter
    joins those threads at exit: 5-20 s after the last line on a loaded machine; a run that fails
    early would otherwise end beside a LiteLLM import still under way in the background; and the
    teardown frees every object one by one, the compiler's index of a long session too (100-200 ms
    after the TUI has already given the terminal back: tests/bench/bench_tui_scale.py). The
    runtime (database and session lease) is closed by now and every event committed, so nothing is
    lost by not waiting; a stream that cannot be flushed has lost its reader."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code. In a process of its own (`argv` None) `foya run` imports
    LiteLLM in the background while it prepares its first request, and it and the TUI end through
    `_exit_now` whatever the outcome: their `with` blocks have closed the runtime by the time an
    error reaches this function. Called with arguments (tests), it starts no thread and returns."""
    own_process = argv is None
    code, command = _run_command(sys.argv[1:] if argv is None else list(argv), own_process)
    if own_process and command in ("run", "tui"):
        _exit_now(code)
    return code


def _run_command(argv: list[str], own_process: bool) -> tuple[int, str | None]:
    """The exit code of one command, and the command (None until the arguments are parsed)."""
    command = None
    try:
        _check_arguments(argv)
        args = build_parser().parse_args(argv)
        command = args.command or "tui"  # no sub-command: the TUI
        if command == "run":
            return _cmd_run(args, background_import=own_process), command
        handler = {
            "sessions": _cmd_sessions,
            "import": _cmd_import,
            "export": _cmd_export,
            "context": _cmd_context,
            "compact": _cmd_compact,
            "inspect": _cmd_inspect,
            "verify": _cmd_verify,
            "rewind": _cmd_rewind,
            "search": _cmd_search,
            "fork": _cmd_fork,
            "config": _cmd_config,
        }.get(args.command, _cmd_tui)
        return handler(args), command
    except FoyaError as exc:
        # Bad input exits 2 having written nothing; other failures say why and exit 1. Anything
        # that is not a FoyaError is a bug, and shows as one.
        say(f"foya: {exc.message}", err=True)
        return exc.exit_code, command
    except BrokenPipeError:
        # `foya export … | head`: the reader left; that is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK, command
    except KeyboardInterrupt:
        return 130, command
    except Exception as exc:
        # An SQLite fault under a valid command (damaged pages, a full disk, a lock held too long,
        # a counter out of step) is one line and exit 1, like every other failure; anything else
        # is a bug and shows as one.
        from foya_tui.runtime.runtime import Runtime

        fault = Runtime.database_fault(exc)
        if fault is None:
            raise
        say(f"foya: {fault.message}", err=True)
        return fault.exit_code, command
