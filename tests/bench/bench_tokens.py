"""Provides the calibration corpus of the token estimator and a benchmark of Foya's counters
against raw tiktoken on the same texts, side by side.

Run: `python tests/bench/bench_tokens.py [--rounds R]`. It prints, from one run:
(a) Foya's cached counter on first count (cold cache) against raw `encode_ordinary`;
(b) the same texts counted again (warm cache) against raw;
(c) the estimator's accuracy, estimate / exact, per kind of text, on o200k_base and cl100k_base,
    calibration and held-out;
(d) the estimator's speed against raw tiktoken.
Rounds alternate which side runs first so machine noise hits both alike; medians are printed.

The corpus is built here, offline: prose written for it (English and Chinese), Python source read
from the stdlib and Textual, and JSON generated like tool calls. `tests/runtime/test_tokens.py`
imports it, so the test and the bench measure the same texts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import textwrap
import time
from collections.abc import Callable
from json import decoder as json_decoder
from pathlib import Path

from foya_tui.runtime.tokens import (
    CachedCounter,
    CharWeightEstimator,
    TiktokenCounter,
    TokenCountCache,
    counter_for_encoding,
)

KINDS = ("english", "chinese", "code", "json")

# ---------------------------------------------------------------------------------------------
# Prose written for the corpus

ENGLISH = """\
A language model sees the world through a fixed window of tokens. Everything the model is asked to \
consider in one request, from the system instructions to the last tool result, has to fit inside that \
window, and the reply has to fit in whatever space is left. A terminal workstation that runs long agent \
sessions therefore spends much of its effort deciding what goes into each request. The history of a \
session is stored as an append-only log of events: user messages, assistant replies, tool calls, tool \
results, checkpoints and compaction summaries. The request is not the log itself but a projection of it, \
compiled again before every model call.

Counting tokens is the first step of that compilation. When the model belongs to a family whose \
tokenizer is published, such as the byte-pair encodings used by recent OpenAI models, the count can be \
exact: the text is split by a regular expression into pieces, each piece is encoded as UTF-8 bytes, and \
the bytes are merged pairwise according to a ranked table until no more merges apply. The number of \
resulting token identifiers is the count. For other families, including Claude, Gemini, Llama and Qwen, \
the tokenizer either is not published or does not ship with the application, so the count has to be \
estimated. An estimate that is too low is dangerous, because the provider rejects a request that \
overflows the window, and the user loses the turn. An estimate that is slightly too high merely \
triggers compaction a little earlier than strictly necessary.

The estimate in this module classifies the text into runs. Letters and digits form word runs; most \
common English words become a single token, while long identifiers and rare words split into several \
pieces of three or four characters. Punctuation usually costs a token per mark, although common pairs \
such as a closing quote followed by a comma are merged. Whitespace is mostly absorbed into the word \
that follows it, except for newlines and long runs of indentation, which tokenizers store as separate \
tokens of varying width. Chinese, Japanese and Korean characters are the hardest case for a simple rule: \
a newer vocabulary encodes many frequent Chinese words as single tokens, while an older vocabulary may \
spend more than one token on a rare character, so the estimate charges roughly one token per character \
and accepts a small over-count.

Performance matters as much as accuracy. A session with a few thousand messages is compiled before \
every step, and the user interface shows a budget meter that updates while the model streams. If each \
compilation re-tokenized the whole history, the cost would grow with the square of the session length. \
Instead, each distinct text is tokenized once: the count is cached under a digest of the content and \
the name of the counter, and a later compilation of the same message finds the number in memory. The \
cache is bounded, so that a session which streams megabytes of tool output cannot exhaust memory; the \
least recently used entries are evicted first.

The budget itself follows a few simple rules. When the window is known, the first request reserves a \
quarter of it for the reply, at most sixteen thousand tokens. After the provider reports real usage, \
the reserve becomes twice the last output, clamped between one thousand and eight thousand tokens. The \
input budget is the window minus the reserve. From seventy percent of that budget the interface offers \
a handoff, and at eighty percent the runtime compacts older history into a summary. An estimate above \
the budget never rejects a request by itself: the provider remains the final judge of capacity, and a \
real usage report always replaces the estimate for the next step.

Testing this behaviour requires care. The simulator that ships with the application counts tokens with \
the same encoding as the exact counter, so tests can assert precise numbers without a network. The \
estimator is calibrated against exact counts on four kinds of text: prose in English, prose in Chinese, \
Python source code and JSON shaped like tool calls. Its weights are documented next to the code, with \
the ratios that justified them, so that a future change of vocabulary can be re-measured rather than \
guessed. Held-out samples, which played no part in choosing the weights, show whether the rule \
generalises or merely memorised the calibration set.
"""

ENGLISH_HELD_OUT = """\
Before you merge a pull request, read the diff from top to bottom at least once. Reviewers often focus \
on the lines that changed and forget the lines that did not: a renamed function whose old callers still \
exist elsewhere, a configuration flag that is now read in two places, or an error path that quietly \
swallows an exception nobody logs. Run the test suite locally, not only in continuous integration, \
because the local run gives you a chance to notice slow tests, flaky timing and warnings that scroll \
past in a remote log. If the change touches persistence, open the database file with a command-line \
client and look at the rows; schemas drift in ways that unit tests rarely notice.

When something breaks in production, resist the urge to patch the symptom immediately. Write down what \
you observed, with timestamps, and reproduce the failure in the smallest environment you can build. A \
reproduction that takes ten seconds is worth more than a theory that takes an hour to test. Once the \
cause is understood, add a regression test that fails without the fix, then write the fix, then check \
that the test passes. Finally, describe the incident in plain words for the people who were affected: \
what happened, why it happened, and what has changed so it will not happen again.
"""

CHINESE = """\
语言模型通过固定大小的上下文窗口来理解输入。一次请求中模型需要考虑的全部内容，从系统指令到最后一次工具调用的结果，\
都必须放进这个窗口，而模型的回复只能使用剩下的空间。因此，一个运行长时间智能体会话的终端工作站，\
需要在每次请求之前仔细决定哪些内容应该发送给模型。会话的历史以只追加的事件日志形式保存，其中包括用户消息、\
助手回复、工具调用、工具结果、检查点和压缩摘要。发送给模型的请求并不是日志本身，而是日志的一种投影，\
在每次调用模型之前都会重新编译。

统计词元数量是编译过程的第一步。如果模型所属的系列公开了分词器，例如较新的模型所使用的字节对编码，\
那么计数可以是精确的：文本先按照正则表达式切分成片段，每个片段再编码为字节，然后按照排好序的合并表逐对合并，\
直到无法继续合并为止。最终得到的词元编号的数量就是计数结果。对于其他模型系列，分词器要么没有公开，\
要么没有随应用一起发布，所以只能进行估算。估算值偏低是危险的，因为服务商会拒绝超出窗口的请求，\
用户就会失去这一轮对话；估算值略微偏高，只会让压缩比实际需要的时间稍早一点发生。

数据库事务是保证数据一致性的基本手段。一个事务中的所有写操作要么全部生效，要么全部不生效，\
这就是原子性。隔离性则描述了并发事务之间能够看到彼此多少中间状态：在读已提交级别下，事务只能读到已经提交的数据；\
在可重复读级别下，同一事务内多次读取同一行会得到相同的结果；在可串行化级别下，并发执行的效果等价于某种串行顺序。\
预写日志是实现持久性的常见方法：修改先写入日志文件并刷新到磁盘，然后才更新数据页。\
系统崩溃之后，恢复程序会重放日志中已经提交的事务，并撤销尚未提交的部分，从而让数据库回到一致的状态。

在分布式系统中，一致性问题变得更加复杂。网络可能延迟、丢包或者分区，节点可能在任何时刻崩溃并重新启动。\
共识算法让一组节点对同一个值达成一致，即使其中少数节点出现故障也不会影响结果。\
常见的做法是选举出一个领导者，由它负责接收客户端请求、把日志条目复制到其他节点，\
并在多数节点确认之后提交该条目。如果领导者失去联系，其余节点会在超时之后发起新的选举。\
为了避免两个领导者同时存在，每一次选举都会使用递增的任期编号，旧任期的消息会被直接忽略。

编译器把源代码翻译成机器能够执行的指令，通常分为前端、中间表示和后端三个部分。\
前端负责词法分析和语法分析，把字符流转换成抽象语法树，并进行类型检查和语义分析。\
中间表示与具体的机器无关，便于进行常量折叠、死代码消除、循环展开和函数内联等优化。\
后端根据目标平台的寄存器数量和指令集，完成指令选择、寄存器分配和指令调度。\
一个好的编译器不仅要生成高效的代码，还要给出清晰准确的错误信息，帮助程序员尽快找到问题所在。
"""

CHINESE_HELD_OUT = """\
操作系统通过虚拟内存为每个进程提供独立的地址空间。进程看到的是连续的虚拟地址，\
而这些地址由内存管理单元按照页表翻译成物理地址。当进程访问的页面不在物理内存中时，\
处理器会触发缺页异常，操作系统随后从磁盘读取对应的页面，必要时按照最近最少使用的策略换出其他页面。\
为了加快地址翻译，处理器内部设有转换后备缓冲区，用来缓存最近使用过的页表项。\
进程切换时，如果缓冲区没有标记地址空间编号，就必须全部清空，这也是上下文切换开销的重要来源之一。

缓存是提升系统性能最常用的技术之一，但缓存也带来了失效和一致性的问题。\
一个常见的原则是：能够根据内容计算出的键，比根据位置或时间生成的键更可靠，\
因为内容不变时键也不变，内容改变时键必然改变。设计缓存时还要考虑容量上限，\
否则在长时间运行的程序里，缓存会不断增长，最终耗尽内存。限制条目数量或者总字节数，\
并在超出上限时淘汰最久未使用的条目，是一种简单而有效的做法。

软件测试的目的不是证明程序没有错误，而是尽可能早地发现错误。单元测试关注单个函数或类的行为，\
运行速度快，适合在每次修改之后立即执行；集成测试检查多个模块组合在一起时能否正确协作，\
例如数据库访问层与业务逻辑之间的接口；端到端测试则从用户的角度出发，模拟真实的操作流程。\
一个健康的测试体系通常呈金字塔形：底层是大量快速的单元测试，中间是适量的集成测试，顶端是少量的端到端测试。\
测试代码本身也需要维护，命名清晰、断言明确、不依赖执行顺序的测试，才能在项目长期演进中持续发挥作用。

传输控制协议在不可靠的网络之上提供可靠的字节流。发送方为每个字节分配序号，接收方通过确认号告诉发送方哪些数据已经收到。\
如果在超时时间内没有收到确认，发送方就会重传数据。为了避免网络拥塞，协议还实现了慢启动、拥塞避免、快速重传和快速恢复等机制：\
连接刚建立时，发送窗口很小，随后按指数增长，直到检测到丢包为止。理解这些机制，\
有助于我们分析为什么在高延迟的链路上，单个连接的吞吐量往往达不到带宽的上限。
"""


MIXED = """\
## 修复：上下文预算在压缩后没有刷新

The budget meter kept showing 91% after `/compact` because `Budget.reserve` was computed from the \
*previous* request. 问题出在 `tracker.py` 第 214 行：基线属于旧的路由，压缩之后应该重新估算。

```python
def latest_baseline(events: list[Event], route: Route) -> Baseline | None:
    for event in reversed(events):
        if event.kind is EventKind.PROVIDER_USAGE and event.payload["route"] == route.key:
            return Baseline(event.seq, event.payload["prompt_tokens"])
    return None
```

调用参数：{"path": "foya_tui/runtime/context/tracker.py", "start_line": 200, "limit": 40}
测试全部通过（312 passed, 2 skipped in 8.41s）。下一步：为路由切换补充回归测试。
"""

# ---------------------------------------------------------------------------------------------
# Code and JSON


def _textual_source(relative: str) -> str:
    # find_spec of the top-level package locates it without importing Textual.
    spec = importlib.util.find_spec("textual")
    assert spec is not None and spec.submodule_search_locations, "textual is a Foya dependency"
    return (Path(next(iter(spec.submodule_search_locations))) / relative).read_text(encoding="utf-8")


def _stdlib_source(module_file: str | None) -> str:
    assert module_file is not None
    return Path(module_file).read_text(encoding="utf-8")


_WORDS = ("budget", "compact", "session", "event", "store", "token", "window", "meter", "route", "anchor")
_DIRS = ("foya_tui/runtime", "foya_tui/ui/widgets", "tests/runtime", "docs", "src/app/models")
_TOOLS = ("read_file", "grep", "list_dir", "run_shell", "apply_patch", "search_symbols")


def tool_calls_json(seed: int, calls: int = 40, indent: int | None = None) -> str:
    """OpenAI-style tool calls (arguments as a JSON string) with their results: paths, line numbers,
    scores, nested lists."""
    rng = random.Random(seed)

    def word() -> str:
        return rng.choice(_WORDS)

    items = []
    for _ in range(calls):
        path = f"{rng.choice(_DIRS)}/{word()}_{word()}.py"
        arguments = {
            "path": path,
            "start_line": rng.randint(1, 900),
            "limit": rng.choice([50, 100, 200]),
            "pattern": f"def {word()}_{word()}\\(",
            "recursive": rng.random() < 0.5,
        }
        matches = [
            {
                "path": path,
                "line": rng.randint(1, 5000),
                "column": rng.randint(0, 80),
                "text": f"    {word()} = {word()}.{word()}({rng.randint(0, 99)})",
                "score": round(rng.random(), 4),
            }
            for _ in range(rng.randint(1, 4))
        ]
        result = {
            "matches": matches,
            "elapsed_ms": round(rng.uniform(0.5, 900), 2),
            "truncated": False,
            "sizes": [rng.randint(0, 100_000) for _ in range(rng.randint(1, 5))],
        }
        items.append(
            {
                "id": f"call_{rng.getrandbits(64):016x}",
                "type": "function",
                "function": {"name": rng.choice(_TOOLS), "arguments": json.dumps(arguments)},
                "result": result,
            }
        )
    return json.dumps(items, indent=indent)


def schemas_and_usage_json(seed: int) -> str:
    """Held-out JSON of other shapes: tool schemas and usage records in canonical (compact) form."""
    rng = random.Random(seed)
    schemas = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{name}",
                "description": f"Read or update the {name} of the session and return them as records.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                        "cursor": {"type": "string"},
                        "filters": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["limit"],
                },
            },
        }
        for name in ("events", "usage", "memory", "rules", "skills")
    ]
    usage = [
        {
            "request_id": f"req_{rng.getrandbits(48):012x}",
            "model": "gpt-4o-mini",
            "usage": {
                "prompt_tokens": rng.randint(100, 90_000),
                "completion_tokens": rng.randint(1, 4000),
                "cached": rng.randint(0, 50_000),
            },
            "latency": [round(rng.uniform(0, 3), 3) for _ in range(3)],
            "cwd": "/home/user/projects/foya",
            "ok": True,
        }
        for _ in range(30)
    ]
    return json.dumps({"tools": schemas, "usage": usage}, sort_keys=True, separators=(",", ":"))


def calibration_corpus() -> dict[str, str]:
    """The texts the estimator's weights were chosen on."""
    return {
        "english": ENGLISH,
        "chinese": CHINESE,
        "code": _stdlib_source(json_decoder.__file__) + _textual_source("widgets/_progress_bar.py"),
        "json": tool_calls_json(seed=1),
    }


def held_out_corpus() -> dict[str, str]:
    """Texts that played no part in choosing the weights."""
    english = ENGLISH_HELD_OUT
    try:
        from pydoc_data.topics import topics  # the stdlib's language reference, as plain text

        english += "\n" + topics["execmodel"]
    except ImportError:  # some distributions strip pydoc_data
        pass
    return {
        "english": english,
        "chinese": CHINESE_HELD_OUT,
        "code": _stdlib_source(textwrap.__file__) + _textual_source("widgets/_tabs.py"),
        "json": schemas_and_usage_json(seed=7) + "\n" + tool_calls_json(seed=99, calls=12, indent=2),
    }


# ---------------------------------------------------------------------------------------------
# The benchmark


def session_texts(
    seed: int = 5, count: int = 1500, sizes: tuple[int, ...] = (40, 120, 300, 800, 2000, 6000)
) -> list[str]:
    """Distinct message-sized texts cut from the corpus, by default sized like a session's messages:
    short user turns and tool arguments, medium replies, long tool results."""
    rng = random.Random(seed)
    pool = "\n".join(list(calibration_corpus().values()) + list(held_out_corpus().values()))
    weights = [2, 3, 3, 2, 1, 1][: len(sizes)]
    texts: dict[str, None] = {}
    while len(texts) < count:
        size = rng.choices(sizes, weights)[0]
        start = rng.randrange(0, len(pool) - size)
        texts[pool[start : start + size]] = None
    return list(texts)


def _time(function: Callable[[str], int], texts: list[str]) -> float:
    start = time.perf_counter()
    for text in texts:
        function(text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()

    exact = counter_for_encoding("o200k_base").inner
    if not isinstance(exact, TiktokenCounter):
        raise SystemExit("o200k_base is not available offline: nothing to compare against")
    encoding = exact._encoding
    texts = session_texts()
    total_chars = sum(map(len, texts))
    short = session_texts(seed=6, count=5000, sizes=(20, 40, 63))

    def raw(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    estimator = CharWeightEstimator()
    cold, warm, raw_times, estimates, short_cold, short_raw = [], [], [], [], [], []
    for round_ in range(args.rounds):
        counter = CachedCounter(exact, TokenCountCache())
        short_counter = CachedCounter(exact, TokenCountCache())
        sides: list[tuple[list[float], Callable[[], float]]] = [
            (raw_times, lambda: _time(raw, texts)),
            (cold, lambda c=counter: _time(c.count, texts)),
            (warm, lambda c=counter: _time(c.count, texts)),  # after cold: the cache is full
            (estimates, lambda: _time(estimator.count, texts)),
            (short_raw, lambda: _time(raw, short)),
            (short_cold, lambda c=short_counter: _time(c.count, short)),
        ]
        # Alternate: odd rounds run raw last, so neither side always runs on a cold CPU cache.
        order = [0, 1, 2, 3, 4, 5] if round_ % 2 == 0 else [1, 2, 3, 0, 5, 4]
        for index in order:
            results, run = sides[index]
            results.append(run())

    def rate(seconds: list[float], chars: int) -> float:
        return chars / statistics.median(seconds) / 1e6

    raw_rate, cold_rate = rate(raw_times, total_chars), rate(cold, total_chars)
    warm_rate, estimate_rate = rate(warm, total_chars), rate(estimates, total_chars)
    short_chars = sum(map(len, short))
    print(
        f"{len(texts)} distinct message-sized texts ({total_chars / 1e6:.2f} M chars), "
        f"median of {args.rounds} alternating rounds"
    )
    print("(a) first count, cold cache")
    print(f"  raw tiktoken encode_ordinary : {raw_rate:8.1f} M chars/s")
    print(f"  foya CachedCounter (cold)    : {cold_rate:8.1f} M chars/s")
    print(f"  foya / raw                   : {cold_rate / raw_rate:8.2f}x speed   (target >= 0.90)")
    short_ratio = rate(short_cold, short_chars) / rate(short_raw, short_chars)
    print(f"  foya / raw on short texts    : {short_ratio:8.2f}x speed   ({len(short)} texts of 20-63 chars)")
    print("(b) repeated count, warm cache")
    print(f"  foya CachedCounter (warm)    : {warm_rate:8.1f} M chars/s")
    print(f"  speed-up over raw            : {warm_rate / raw_rate:8.1f}x")
    print("(c) estimator accuracy, estimate / exact   (target 0.90-1.10; Chinese: ~1 token a char)")
    cl100k = counter_for_encoding("cl100k_base").inner
    print(f"  {'kind':8} {'o200k cal':>10} {'o200k held':>11} {'cl100k cal':>11} {'cl100k held':>12}")
    calibration, held_out = calibration_corpus(), held_out_corpus()
    for kind in KINDS:
        cells = [
            estimator.count(corpus[kind]) / tokenizer.count(corpus[kind])
            for tokenizer in (exact, cl100k)
            for corpus in (calibration, held_out)
        ]
        print(f"  {kind:8} " + " ".join(f"{cell:>10.3f} " for cell in cells))
    mixed = [estimator.count(MIXED) / tokenizer.count(MIXED) for tokenizer in (exact, cl100k)]
    print(f"  {'mixed':8} {mixed[0]:>10.3f}  (o200k)   {mixed[1]:>10.3f}  (cl100k)")
    print("(d) estimator speed (uncached)")
    print(f"  CharWeightEstimator          : {estimate_rate:8.1f} M chars/s")
    print(f"  estimator / raw tiktoken     : {estimate_rate / raw_rate:8.2f}x speed")


if __name__ == "__main__":
    main()
