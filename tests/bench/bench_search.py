"""Provides a benchmark of the full-text index of canonical history (store/search.py): its size, search
latency, the cost it adds to appends, and the migration that indexes an existing database.

Run: `python tests/bench/bench_search.py [--events 100000] [--small 10000] [--repeats 20]
[--appends 1000] [--rounds 5]`. Numbers only, no assertions. It prints, from one run:
(1) the database file (after a WAL checkpoint) and the index's share of it, at 10,000 and 100,000
    events, from SQLite's `dbstat` (or, without it, a copy with the index dropped and vacuumed);
(2) search latency on the 100,000-event session, median and p95 of R calls per query kind (calls
    round-robin over the kinds, so noise hits them alike), against a plain `LIKE '%…%'` scan of
    the event table for the rare identifier;
(3) single-event append transactions with the index on and off, fresh databases, rounds interleaved;
(4) the migration to schema 4 on the 100,000-event database (index dropped, schema set back to 3,
    reopened with `open_database(path, progress)`), and, for reference, a rewind appended to it
    (its index delete scans the session's rows).

Sessions are realistic agent history: `transcript()` from bench_compaction.py (requests, tool steps
with code reads, test runs and grep output, replies) stored as native events (user and assistant
messages, tool results, a provider usage record after each reply, which is not indexed), with one
turn in five in Chinese and a rare identifier in three tool results. The large session is built
once, through `EventStore.append` with the index on (batches of 100 events), and reused.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import peewee

from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.runtime.store.db import Database
from foya_tui.runtime.store.search import MIN_TRIGRAM_CHARS, parse_query
from tests.bench.bench_compaction import WORDS, transcript

RARE = "QuotaLedgerOverflow"
ZH_TOPICS = ("解析器", "缓存", "配置文件", "会话", "请求处理", "数据库迁移", "日志模块", "权限检查")
BATCH = 100


# -- realistic history ----------------------------------------------------------------------------


def chinese_request(rng: random.Random, module: str) -> str:
    topic = rng.choice(ZH_TOPICS)
    return rng.choice(
        (
            f"请看一下 `{module}`：{topic}在输入为空时报错，找出原因并修复，不要改动公开接口。",
            f"`{module}` 里的{topic}偶尔出现缓存失效的问题，导致测试不稳定，帮我查一下。",
            f"把{topic}相关的目录结构整理一下，`{module}` 的测试要全部通过。",
            f"{topic}的错误信息不够清楚，请在 `{module}` 中补充上下文，并说明修改的理由。",
        )
    )


def chinese_reply(rng: random.Random, module: str) -> str:
    topic = rng.choice(ZH_TOPICS)
    return rng.choice(
        (
            f"{topic}在检查之前就被读取了；我在 `{module}` 中加了保护，测试已通过。",
            f"问题出在缓存失效后没有重新加载{topic}，已修复 `{module}`，测试全部通过。",
            f"目录结构已整理，`{module}` 只改了导入路径，公开接口不变。",
            f"已在 `{module}` 中补充了{topic}的错误上下文，新增两个测试用例。",
        )
    )


def history(count: int, seed: int = 11) -> list[NewEvent]:
    """`count` native events of an agent session (see the module docstring)."""
    rng = random.Random(seed + 1)
    messages = transcript(int(count / 1.35) + 50, seed)[1:]  # no system prompt in a native session
    events: list[NewEvent] = []
    chinese = False
    module = "src/parser/core.py"
    for message in messages:
        role, content = message["role"], message["content"]
        if role == "user":
            chinese = rng.random() < 0.2
            module = content.split("`")[1]
            text = chinese_request(rng, module) if chinese else content
            events.append(NewEvent(EventKind.USER_MESSAGE, {"text": text}))
        elif role == "assistant":
            calls = [
                {"id": call["id"], "name": function["name"], "arguments": function["arguments"]}
                for call in message.get("tool_calls") or ()
                if (function := call["function"])
            ]
            if chinese and content:
                note = f"正在检查 {rng.choice(WORDS)} 的路径。"
                content = note if calls else chinese_reply(rng, module)
            finish = "tool_calls" if calls else "stop"
            payload = {"text": content or "", "tool_calls": calls, "finish_reason": finish}
            events.append(NewEvent(EventKind.ASSISTANT_MESSAGE, payload))
            usage = {"input_tokens": rng.randint(2_000, 30_000), "output_tokens": rng.randint(20, 900)}
            events.append(NewEvent(EventKind.PROVIDER_USAGE, {"route_id": "bench", "usage": usage}))
        else:
            payload = {"tool_call_id": message["tool_call_id"], "name": "shell", "content": content}
            events.append(NewEvent(EventKind.TOOL_RESULT, {**payload, "is_error": False}))
    events = events[:count]
    for share in (0.1, 0.5, 0.9):  # the rare identifier, in three tool results
        at = next(n for n in range(int(count * share), count) if events[n].kind is EventKind.TOOL_RESULT)
        payload = dict(events[at].payload)
        payload["content"] += f"\nE   {RARE}: tenant 4711 is over its budget (limit 4096)"
        events[at] = NewEvent(EventKind.TOOL_RESULT, payload)
    return events


def build(path: Path, events: Sequence[NewEvent]) -> tuple[str, float]:
    """A database holding one session of `events`, appended with the index on; (session, seconds)."""
    database = open_database(path)
    store = EventStore(database)
    session_id = store.create_session().id
    start = time.perf_counter()
    for at in range(0, len(events), BATCH):
        store.append(session_id, events[at : at + BATCH])
    elapsed = time.perf_counter() - start
    database.close()
    return session_id, elapsed


# -- (1) size -------------------------------------------------------------------------------------


def checkpoint(database: Database) -> None:
    database.connection.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def table_sizes(database: Database) -> dict[str, int] | None:
    """Bytes per table and index (dbstat), or None when this SQLite has no dbstat."""
    sql = database.connection
    try:
        rows = sql.execute_sql("SELECT name, pgsize FROM dbstat WHERE aggregate = TRUE").fetchall()
    except peewee.OperationalError:  # an older SQLite without `aggregate`, or no dbstat at all
        try:
            rows = sql.execute_sql("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
        except peewee.OperationalError:
            return None
    return {name: int(size) for name, size in rows}


def size_without_index(path: Path) -> int:
    """The database's size once the index is dropped and the file vacuumed (a copy: no dbstat)."""
    copy = path.with_name(path.stem + "-noindex.sqlite3")
    shutil.copyfile(path, copy)
    connection = sqlite3.connect(copy, isolation_level=None)
    connection.execute("DROP TABLE event_fts")
    connection.execute("VACUUM")
    connection.close()
    size = copy.stat().st_size
    copy.unlink()
    return size


def measure_size(path: Path) -> dict[str, Any]:
    database = open_database(path)
    checkpoint(database)
    sql = database.connection
    text = sql.execute_sql("SELECT COUNT(*), SUM(LENGTH(CAST(body AS BLOB))) FROM event_fts").fetchone()
    payload = sql.execute_sql("SELECT COUNT(*), SUM(LENGTH(CAST(payload AS BLOB))) FROM event").fetchone()
    sizes = table_sizes(database)
    database.close()
    total = path.stat().st_size
    out: dict[str, Any] = {
        "events": payload[0],
        "payload": payload[1],
        "indexed": text[0],
        "text": text[1],
        "file": total,
        "dbstat": sizes is not None,
    }
    if sizes is not None:
        fts = {name: size for name, size in sizes.items() if name.startswith("event_fts")}
        out["fts"] = sum(fts.values())
        out["content"] = fts.get("event_fts_content", 0)
        out["postings"] = fts.get("event_fts_data", 0) + fts.get("event_fts_idx", 0)
        out["event"] = sizes.get("event", 0)
    else:
        out["fts"] = total - size_without_index(path)
    return out


# -- (2) search latency ---------------------------------------------------------------------------


def matching(database: Database, session_id: str, query: str, window: Mapping[str, int]) -> int:
    """How many events match a query (all of them, not the 20 a search returns)."""
    terms = parse_query(query)
    where, params = ["session_id = ?"], [session_id]
    long_terms = [term for term in terms if len(term) >= MIN_TRIGRAM_CHARS]
    if long_terms:
        where.append("event_fts MATCH ?")
        params.append(" AND ".join('"' + term.replace('"', '""') + '"' for term in long_terms))
    for term in terms:
        if len(term) < MIN_TRIGRAM_CHARS:
            # ESCAPE as search() has it: on SQLite 3.40, `body LIKE '%目录%'` without ESCAPE is
            # answered by the trigram index and finds nothing (6 bytes, but no trigram).
            escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append("body LIKE ? ESCAPE '\\'")
            params.append(f"%{escaped}%")
    if "from_seq" in window:
        where.append("seq >= ?")
        params.append(window["from_seq"])
    if "through_seq" in window:
        where.append("seq <= ?")
        params.append(window["through_seq"])
    sql = f"SELECT COUNT(*) FROM event_fts WHERE {' AND '.join(where)}"
    return int(database.connection.execute_sql(sql, params).fetchone()[0])


def pad(text: str, width: int) -> str:
    """`text` left-aligned in `width` terminal columns (a Chinese character takes two)."""
    columns = sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)
    return text + " " * max(0, width - columns)


def percentile(times: Sequence[float], share: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def search_latency(path: Path, session_id: str, events: int, repeats: int) -> list[dict[str, Any]]:
    database = open_database(path)
    store = EventStore(database)
    covered = {"from_seq": 1, "through_seq": events // 2}
    kinds: list[tuple[str, str, Mapping[str, int]]] = [
        ("rare identifier", RARE, {}),
        ("common word", "parser", {}),
        ("quoted phrase", '"is not a valid ledger"', {}),
        ("Chinese, 2 chars (LIKE)", "目录", {}),
        ("Chinese, 4 chars", "缓存失效", {}),
        (f"covered range 1–{events // 2}", "AssertionError", covered),
        ("no hits", "xylophone_manifest", {}),
    ]
    sql = database.connection
    like = "SELECT seq FROM event WHERE session_id = ? AND payload LIKE ? ORDER BY seq DESC LIMIT 20"

    def plain_like() -> list[Any]:
        return sql.execute_sql(like, (session_id, f"%{RARE}%")).fetchall()

    actions: list[tuple[str, str, Callable[[], Sequence[Any]]]] = [
        (name, query, lambda query=query, window=window: store.search(session_id, query, **window))
        for name, query, window in kinds
    ]
    actions.append(("rare identifier, LIKE scan of event", f"LIKE '%{RARE}%'", plain_like))
    counts = [matching(database, session_id, query, window) for _, query, window in kinds]
    counts.append(len(plain_like()))
    returned = [len(action()) for _, _, action in actions]  # also warms the page cache
    times: list[list[float]] = [[] for _ in actions]
    for _ in range(repeats):
        for at, (_, _, action) in enumerate(actions):
            start = time.perf_counter()
            action()
            times[at].append(time.perf_counter() - start)
    database.close()
    return [
        {
            "name": name,
            "query": query,
            "matching": counts[at],
            "returned": returned[at],
            "median": statistics.median(times[at]),
            "p95": percentile(times[at], 0.95),
        }
        for at, (name, query, _) in enumerate(actions)
    ]


# -- (3) append throughput ------------------------------------------------------------------------


def single_appends(path: Path, events: Sequence[NewEvent], index: bool) -> float:
    database = open_database(path)
    store = EventStore(database, search_index=index)
    session_id = store.create_session().id
    start = time.perf_counter()
    for event in events:
        store.append(session_id, [event])
    elapsed = time.perf_counter() - start
    database.close()
    return elapsed


# -- (4) migration --------------------------------------------------------------------------------


def migrate(path: Path) -> tuple[float, list[tuple[int, int]]]:
    """Drop the index, mark the database schema 3, and time reopening it (the migration to 4)."""
    database = open_database(path)
    with database.connection.atomic():
        database.connection.execute_sql("DROP TABLE event_fts")
        database.connection.execute_sql("UPDATE schema_version SET version = 3")
    checkpoint(database)
    database.close()
    calls: list[tuple[int, int]] = []
    start = time.perf_counter()
    database = open_database(path, lambda done, total: calls.append((done, total)))
    elapsed = time.perf_counter() - start
    database.close()
    return elapsed, calls


def rare_seqs(path: Path, session_id: str) -> list[int]:
    database = open_database(path)
    seqs = [hit.seq for hit in EventStore(database).search(session_id, RARE)]
    database.close()
    return seqs


def rewind_appends(path: Path, session_id: str, rounds: int) -> tuple[float, float]:
    """(median rewind append, median message append) on the large session, index on. Each rewind
    goes back to the last event, so it invalidates nothing and history is unchanged."""
    database = open_database(path)
    store = EventStore(database)
    rewinds, messages = [], []
    for _ in range(rounds):
        to_seq = store.last_seq(session_id)
        start = time.perf_counter()
        store.append(session_id, [NewEvent(EventKind.REWIND, {"to_seq": to_seq})])
        rewinds.append(time.perf_counter() - start)
        start = time.perf_counter()
        store.append(session_id, [NewEvent(EventKind.USER_MESSAGE, {"text": "and the next step?"})])
        messages.append(time.perf_counter() - start)
    database.close()
    return statistics.median(rewinds), statistics.median(messages)


# -- report ---------------------------------------------------------------------------------------


def mb(size: float) -> str:
    return f"{size / 1_000_000:,.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="the large session")
    parser.add_argument("--small", type=int, default=10_000, help="the small session (size only)")
    parser.add_argument("--repeats", type=int, default=20, help="calls per query kind")
    parser.add_argument("--appends", type=int, default=1000, help="single-event appends per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    events = history(args.events)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small, large = folder / "small.sqlite3", folder / "large.sqlite3"
        build(small, events[: args.small])
        session_id, build_seconds = build(large, events)
        sizes = [measure_size(small), measure_size(large)]

        how = "dbstat" if sizes[0]["dbstat"] else "a vacuumed copy without the index"
        print(f"(1) index size (database after a WAL checkpoint; index measured with {how})")
        print(
            f"{'events':>8} {'indexed':>8} {'payloads':>10} {'indexed text':>13} {'database':>10} "
            f"{'index':>10} {'share':>6} {'index/text':>10}  of which"
        )
        for size in sizes:
            detail = (
                f"text copy {mb(size['content'])}, postings {mb(size['postings'])}"
                if size["dbstat"]
                else "(dbstat unavailable)"
            )
            print(
                f"{size['events']:>8,} {size['indexed']:>8,} {mb(size['payload']):>10} "
                f"{mb(size['text']):>13} {mb(size['file']):>10} {mb(size['fts']):>10} "
                f"{size['fts'] / size['file']:>6.0%} "
                f"{size['fts'] / size['text']:>9.1f}x  {detail}"
            )
        print(
            f"  built through EventStore.append, index on, batches of {BATCH}: {args.events:,} events "
            f"in {build_seconds:.1f} s"
        )

        results = search_latency(large, session_id, args.events, args.repeats)
        print()
        print(f"(2) search latency, {args.events:,}-event session, limit 20 (ms over {args.repeats} calls)")
        print(f"{'query kind':<36} {'query':<30} {'matching':>8} {'returned':>8} {'median':>8} {'p95':>8}")
        for result in results:
            print(
                f"{result['name']:<36} {pad(result['query'], 30)} {result['matching']:>8,} "
                f"{result['returned']:>8} {result['median'] * 1000:>8.2f} {result['p95'] * 1000:>8.2f}"
            )
        indexed, scanned = results[0]["median"], results[-1]["median"]
        print(f"  rare identifier: LIKE scan / index = {scanned / indexed:,.0f}x the time")

        appended = [event for event in events if event.kind is not EventKind.PROVIDER_USAGE][: args.appends]
        on_times, off_times = [], []
        for round_ in range(args.rounds):
            first, second = (True, False) if round_ % 2 == 0 else (False, True)
            for index in (first, second):
                elapsed = single_appends(folder / f"append-{round_}-{index}.sqlite3", appended, index)
                (on_times if index else off_times).append(elapsed)
        on_rate = len(appended) / statistics.median(on_times)
        off_rate = len(appended) / statistics.median(off_times)
        characters = sum(
            len(str(event.payload.get("text") or event.payload.get("content") or "")) for event in appended
        )
        print()
        print(
            f"(3) append throughput: {len(appended):,} single-event transactions of message events "
            f"(avg {characters / len(appended):,.0f} chars), fresh databases, median of {args.rounds} rounds"
        )
        print(f"  index on  : {on_rate:10,.0f} appends/s")
        print(f"  index off : {off_rate:10,.0f} appends/s")
        print(f"  on / off  : {on_rate / off_rate:10.2f}x speed")

        before = rare_seqs(large, session_id)
        migration, calls = migrate(large)
        after = rare_seqs(large, session_id)
        rewind, message = rewind_appends(large, session_id, args.rounds)
        print()
        print(f"(4) migration to schema 4: indexing an existing {args.events:,}-event database")
        rate = args.events / migration
        print(f"  open_database(path, progress) : {migration:8.1f} s   {rate:10,.0f} events/s")
        last = calls[-1] if calls else None
        print(f"  progress callback             : {len(calls)} calls, last {last}")
        same = "same" if before == after else "DIFFERENT"
        print(f"  rare identifier, before/after : seqs {before} / {after} ({same})")
        print(f"  for reference, on the indexed database (median of {args.rounds}):")
        print(f"    rewind append (deletes from the index) : {rewind * 1000:8.1f} ms")
        print(f"    message append                         : {message * 1000:8.1f} ms")
    print()
    print(f"total run time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
