"""Provides the `foya` command line: the TUI by default, and headless sub-commands (DESIGN §5).

User mistakes (bad flags, unknown sessions, malformed files, bad config) print one sentence on
stderr and exit with code 2; nothing is written. Provider failures exit with code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from foya_tui import __version__
from foya_tui.errors import EXIT_FAILED, EXIT_OK, FoyaError, InputError
from foya_tui.settings import APPROVAL_MODES


class UsageError(InputError):
    """A mistake on the command line itself (a flag, an empty prompt, an unreadable file)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the whole usage block; one clear line is kinder in scripts.
        raise UsageError(f"{message} (see `foya --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="foya", description="A terminal workstation for long LLM-agent sessions.")
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

    sessions = commands.add_parser("sessions", help="list sessions")
    sessions.add_argument("--json", action="store_true", help="print JSON")

    importer = commands.add_parser("import", help="import OpenAI-format messages (JSON array or JSONL)")
    importer.add_argument("file", help="transcript file; '-' reads stdin")

    export = commands.add_parser("export", help="print a session as JSON lines")
    export.add_argument("session", metavar="SESSION")
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
        help="make the deterministic fallback checkpoint, without asking any model (SPEC K-10)",
    )

    inspect = commands.add_parser("inspect", help="checkpoints, segments, diagnostics, fingerprints")
    inspect.add_argument("session", metavar="SESSION")
    inspect.add_argument("--json", action="store_true", help="print JSON")

    verify = commands.add_parser("verify", help="re-validate a session's store and checkpoints")
    verify.add_argument("session", metavar="SESSION")

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


def _open_runtime(args: argparse.Namespace):
    from foya_tui.paths import resolve_paths
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.settings import load_settings

    paths = resolve_paths(database=args.db)
    settings = load_settings(paths.config_file)
    return Runtime(
        settings, paths, approval_mode=getattr(args, "approval", None), migration_progress=index_progress
    )


INDEX_PROGRESS_FROM = 10_000
"""Databases with at least this many events say how indexing them for search goes."""


def index_progress(done: int, total: int) -> None:
    """Progress of the migration that indexes an older database for search, on stderr."""
    if total >= INDEX_PROGRESS_FROM and (done == total or done % max(5_000, total // 10) < 5_000):
        print(f"foya: indexing history for search: {done:,} of {total:,} events", file=sys.stderr)


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _cmd_run(args: argparse.Namespace) -> int:
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    if args.run_model or args.model or not args.run_session:
        _preflight(args, args.run_model or args.model)
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

    with _open_runtime(args) as runtime:
        route = runtime.route_for(args.run_model or args.model)
        session = (
            runtime.open_session(args.run_session, route) if args.run_session else runtime.new_session(route)
        )
        status = EXIT_FAILED
        for update in session.send(prompt):
            if args.json:
                _print_json(update.to_json())
            elif isinstance(update, ReplyDelta):
                sys.stdout.write(update.text)
                sys.stdout.flush()
            elif isinstance(update, ToolCallStarted):
                print(f"foya: ▸ {update.name} {update.arguments}", file=sys.stderr)
            elif isinstance(update, ToolCallFinished):
                mark = "✗" if update.is_error else "✓"
                print(f"foya:   {mark} {update.name}: {len(update.content):,} characters", file=sys.stderr)
            elif isinstance(update, RetryScheduled):
                print(f"foya: {update.reason}; retrying in {update.delay_seconds:.1f} s", file=sys.stderr)
            elif isinstance(update, TurnFinished):
                sys.stdout.write("\n")
                if update.notice:
                    print(f"foya: {update.notice}", file=sys.stderr)
            elif isinstance(update, TurnFailed):
                print(f"foya: {update.reason}", file=sys.stderr)
            elif isinstance(update, CompactionProgressed):
                detail = f" {update.detail}" if update.detail else ""
                print(f"foya: compaction ({update.trigger}): {update.stage}{detail}…", file=sys.stderr)
            elif isinstance(update, CompactionFinished):
                report = update.report
                print(f"foya: compaction {report['outcome']}: {report['reason']}", file=sys.stderr)
            elif isinstance(update, ContextSnipped):
                print(
                    f"foya: {update.mode}: {update.results} old tool result(s) left the model's view "
                    f"(−{update.tokens_saved:,} tokens; history keeps them)",
                    file=sys.stderr,
                )
            elif isinstance(update, HandoffRecorded):
                print("foya: handoff band: the model was asked to record where it stands", file=sys.stderr)
            if isinstance(update, TurnFinished):
                status = EXIT_OK
        return status


def _cmd_sessions(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        sessions = runtime.list_sessions()
    if args.json:
        _print_json(
            {
                "sessions": [
                    {"id": s.id, "title": s.title, "updated": s.updated_at, "events": s.event_count}
                    for s in sessions
                ]
            }
        )
        return EXIT_OK
    if not sessions:
        print('no sessions yet: run `foya` or `foya run "hello"`')
        return EXIT_OK
    for s in sessions:
        print(f"{s.short_id}  {s.updated_at[:19].replace('T', ' ')}  {s.event_count:>6} events  {s.title}")
    return EXIT_OK


def _cmd_import(args: argparse.Namespace) -> int:
    if args.file == "-":
        data, source = sys.stdin.buffer.read(), "stdin"
    else:
        path = Path(args.file)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {args.file}: {exc.strerror or exc}") from None
        source = path.name
    with _open_runtime(args) as runtime:
        info = runtime.import_transcript(data, source)
    print(info.id)
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        model = args.sub_model or args.model
        route = runtime.route_for(model) if model else None
        for record in runtime.export(args.session, projection=args.projection, route=route):
            _print_json(record)
    return EXIT_OK


def _cmd_context(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        model = args.sub_model or args.model
        report = runtime.context(args.session, runtime.route_for(model) if model else None).report()
    if args.json:
        _print_json(report)
        return EXIT_OK
    print(format_context(report))
    return EXIT_OK


def format_context(report: dict) -> str:
    """The human form of `foya context`: layers, budget lines, estimate and its source."""
    route = report["route"]
    window = f"{report['window']:,}" if report["window"] else "unknown"
    estimate = report["estimate"]
    exactness = (
        "counted with " + report["counter"] if report["counted_exactly"] else "estimated (no tokenizer)"
    )
    lines = [
        f"session {report['session'][:6]} · {route['model']}{' (simulator)' if route['simulator'] else ''}"
        f" · connection {route['connection']} · route {route['id']}",
        f"window {window} ({report['window_source']}) · output reserve {report['output_reserve']:,}"
        f" ({report['reserve_basis']}) · input budget {report['input_budget']:,}",
        "",
        f"layers ({exactness}):",
    ]
    for name, tokens in report["layers"].items():
        lines.append(f"  {name.replace('_', ' '):<13}{tokens:>10,}")
    lines += [
        "",
        f"next request  {estimate['total']:>10,}  {estimate['source']}: {estimate['reason']}",
        f"handoff at    {report['handoff_at']:>10,}",
        f"compact at    {report['high_water']:>10,}",
        f"verdict       {report['verdict']:>10}"
        f"   ({report['messages']} messages through seq {report['through_seq']})",
    ]
    checkpoint = report.get("checkpoint")
    if checkpoint:
        lines.append(
            f"checkpoint    {checkpoint['id'][:12]}  L{checkpoint['level']}"
            f" · {checkpoint['segments']} segment(s) · covers through seq {checkpoint['through_seq']}"
            f" ({checkpoint['phase']}, {checkpoint['producer']})"
        )
    native = report.get("native")
    if native:
        sent = "sent with this request" if native["sent"] else "not sent: it belongs to another route (R-2)"
        lines.append(f"native state  {native['checkpoint_id'][:12]} of {native['bound_model']}, {sent}")
    snipped = report.get("snipped")
    if snipped and snipped["count"]:
        lines.append(
            f"snipped       {snipped['count']:>10,} old tool result(s) shown as placeholders"
            f" (−{snipped['tokens_saved']:,} tokens)"
        )
    handoff = report.get("handoff")
    if handoff and handoff["status"] != "none":
        lines.append(f"handoff       {handoff['status']:>10} for this epoch")
    if report.get("snapshot_known") is False:
        lines.append("token count   unknown window and no usage yet: no handoff or LLM compaction (K-5)")
    lines += [f"note: {notice}" for notice in report["notices"]]
    return "\n".join(lines)


def _cmd_compact(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        model = args.sub_model or args.model
        progress = None
        if not args.json:
            progress = lambda stage, detail: print(  # noqa: E731 - one line, only here
                f"foya: {stage}{' ' + detail if detail else ''}…", file=sys.stderr
            )
        route = runtime.route_for(model) if model else None
        result = runtime.compact(args.session, route, progress=progress, use_model=not args.fallback)
        offer = None if args.fallback else runtime.fallback_offer(args.session, route, result)
    report = result.report()
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
        print(line)
    return EXIT_OK if report["outcome"] in ("accepted", "nothing_to_compact") else EXIT_FAILED


def _cmd_inspect(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        report = runtime.inspect(args.session)
    if args.json:
        _print_json(report.to_json())
        return EXIT_OK
    print(format_inspect(report.to_json()))
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
    with _open_runtime(args) as runtime:
        report = runtime.verify(args.session)
    print("\n".join(report.lines()))
    return EXIT_OK if report.ok else EXIT_FAILED


def _cmd_search(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        hits = runtime.search(args.session, args.query, limit=args.limit)
    if args.json:
        _print_json({"hits": [hit.to_json() for hit in hits]})
        return EXIT_OK
    if not hits:
        print(f"no events match {args.query!r}")
    for hit in hits:
        covered = hit.covered_by
        where = (
            f"  (summarised: checkpoint {covered.checkpoint_id[:12]} seg {covered.segment})"
            if covered
            else ""
        )
        print(f"seq {hit.seq:>6}  {hit.role or hit.kind:<9} {hit.snippet}{where}")
    return EXIT_OK


def _cmd_rewind(args: argparse.Namespace) -> int:
    with _open_runtime(args) as runtime:
        seq = runtime.rewind(args.session, args.seq)
    print(f"rewound to seq {args.seq} (rewind event {seq}); later events stay in canonical history")
    return EXIT_OK


def _cmd_fork(args: argparse.Namespace) -> int:
    from foya_tui.runtime.fork import fork_session

    with _open_runtime(args) as runtime:
        source = runtime.store.find_session(args.session)
        info = fork_session(runtime.store, source.id, args.at)
    if args.json:
        at = info.metadata["forked_from"]["seq"]
        _print_json({"session": info.id, "from": source.id, "at": at, "messages": info.event_count})
    else:
        print(info.id)
    return EXIT_OK


def _cmd_tui(args: argparse.Namespace) -> int:
    from foya_tui.ui.app import run_app

    return run_app(database=args.db, model=args.model, session=args.session)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        handler = {
            "run": _cmd_run,
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
        }.get(args.command, _cmd_tui)
        return handler(args)
    except FoyaError as exc:
        # Bad input exits 2 having written nothing; other failures say why and exit 1. Anything
        # that is not a FoyaError is a bug, and shows as one.
        print(f"foya: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `foya export … | head`: the reader left; that is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
