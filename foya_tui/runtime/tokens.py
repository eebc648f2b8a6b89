"""Provides token counting: exact BPE counts where the model's tokenizer ships offline, a calibrated
conservative estimate everywhere else, and a bounded cache so each distinct text is tokenized once.

- `counter_for_model(model)` maps a model name to a counter: OpenAI families to `o200k_base` or
  `cl100k_base` (exact), the simulator to `o200k_base` (it is Foya's own tokenizer), and every
  other family (Claude, Gemini, Qwen, Llama, Mistral, DeepSeek, unknown) to `CharWeightEstimator`
  (`exact = False`), because no tiktoken encoding fits them.
- The encodings are the files LiteLLM ships (located with `importlib.util.find_spec`, so LiteLLM
  itself is not imported). An encoding that is not on disk is never downloaded: the estimator
  stands in.
- Every counter handed out is a `CachedCounter`: counts are remembered under (counter name, content
  key) in one process-wide LRU, so compiling the same history again re-tokenizes nothing.

The estimator's weights and the measurements behind them are documented on `CharWeights`; the
calibration corpus and the side-by-side numbers are in `tests/bench/bench_tokens.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import math
import os
import re
import string
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from foya_tui.runtime.digests import canonical_json
from foya_tui.runtime.text import content_text

DEFAULT_ENCODING = "o200k_base"
# OpenAI chat format: every message costs a few tokens of framing, every reply a few of priming.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3

# The cache bound: 50,000 counts, least recently used evicted first. An entry (key tuple, 32-byte
# digest or short text, int, LRU links) measures ~230 bytes with a digest key, up to ~400 with a
# short text kept alive as its key, so the cache holds 12-20 MB at most, however much streams by.
CACHE_MAX_ENTRIES = 50_000
# Texts shorter than this are keyed by the text itself: its hash is cached by Python, so the key
# costs ~35 ns against ~430 ns to encode and hash it, and is no bigger than a digest. Longer texts
# are keyed by their SHA-256 (hardware-accelerated: ~1.8 GB/s here against ~1 GB/s for BLAKE2b),
# a few percent of tokenizing them at ~20 MB/s.
SHORT_TEXT_CHARS = 64


class TokenCounter(Protocol):
    """Counts tokens of text; `exact` says whether counts are measured by a real tokenizer."""

    name: str
    exact: bool

    def count(self, text: str) -> int: ...


# ---------------------------------------------------------------------------------------------
# The estimator


@dataclass(frozen=True)
class CharWeights:
    """Tokens charged per feature of the text. Each weight follows how BPE tokenizers of the
    o200k/cl100k kind split text: a regular expression first cuts it into pieces (letter runs,
    digit groups of at most three, punctuation runs, whitespace), then pieces are merged or split.

    Chosen by a grid search on the calibration corpus (English prose, Chinese prose, Python from
    `json/decoder.py` and Textual's `_progress_bar.py`, JSON tool calls), targeting estimate/exact
    ≈ 1.04 on o200k_base for each kind, then checked on held-out text. Measured estimate/exact:

    | kind    | o200k cal | o200k held-out | cl100k cal | cl100k held-out |
    |---------|-----------|----------------|------------|-----------------|
    | English | 1.04      | 1.02           | 1.04       | 1.02            |
    | code    | 1.04      | 1.07           | 1.05       | 1.08            |
    | JSON    | 1.03      | 1.03           | 1.03       | 1.04            |
    | Chinese | 1.40      | 1.39           | 0.99       | 0.96            |

    Chinese is the one kind no single weight fits: o200k spends ~0.71 tokens per character,
    cl100k ~1.0, Anthropic's published tokenizer ~0.9, DeepSeek's ~0.55. One token per character
    is the conservative choice for an unknown model (`len/4` would undercount Chinese fourfold).
    Spot checks beyond the four kinds (o200k / cl100k): base64 0.97 / 0.92, hex digests 0.97,
    URLs 1.12, shell listings 1.09, Cyrillic 1.8 / 1.1; known undercounts: emoji and hangul under
    cl100k (0.7-0.8), which spends two or more tokens on each.

    Number-dense text and long hex runs are charged extra (`number_run_digit`, `hex_run_char`):
    against Gemma 3's tokenizer the plain weights gave CSV numbers 0.46, log lines 0.61 and hex
    digests 0.65 of the real count, and an underestimate is the dangerous direction. On o200k
    they now err high (CSV ~2.1, hex ~2.0, logs ~1.5) until a route's calibration corrects them;
    the four kinds above moved by at most 0.06 (JSON with its ids and numbers: 1.03 → 1.09).
    """

    word: float = 1.1
    """Per run of ASCII letters. A common word is one token; about one in ten (long or rare words,
    identifier fragments) splits in two, hence 1.1 (English measured at 1.05-1.1 tokens a word)."""
    hump: float = 2.0
    """Per lower-to-upper case change (`ProgressBar`): o200k starts a new piece there, and
    mixed-case fragments are rare in vocabularies (fitted 1.5-2.9). 2 also keeps random base64, a
    case change every ~4 characters, from undercounting (0.72 of exact at 1, 0.97 at 2)."""
    digit_group: float = 1.0
    """Per group of up to three digits: both encodings cut numbers into 1-3 digit pieces."""
    number_run_digit: float = 1.0
    """Per digit of number-dense text (a run of 16+ characters of digits and `.,:;/-` or blanks,
    with 10+ digits: CSV rows, timestamps, number lists), on top of its groups. Tokenizers of the
    SentencePiece kind (Gemma, Llama 2, Mistral) spend one token per digit where o200k spends one
    per three: measured against Gemma 3, CSV numbers were 0.46 of the real count and log lines
    0.61 without this. With it, o200k's CSV is ~2.1 and log lines ~1.5: the estimate errs high
    until the route's calibration (tracker.py) learns the real tokenizer."""
    hex_run_char: float = 0.6
    """Per character of a run of 20+ hex digits mixing letters and digits (digests, long ids):
    Gemma counted hex digests at 1/0.65 of this estimator's old figure; o200k is now ~2.0."""
    punct_run: float = 0.5
    punct_char: float = 0.25
    """Punctuation: common runs merge into one token (`":`, `),`, `)):`) and a mark just before a
    word often joins it (`.append`, `_name`), so a run costs 0.5 plus 0.25 per mark (fitted: 0.41-0.55
    per run and 0.19-0.24 per mark)."""
    line_end: float = 0.5
    """Per newline right after a letter or digit (wrapped prose, shell output): a token of its own.
    After punctuation (`):\\n`) a newline joins the punctuation's token and is not charged.
    Fitted 0.5-1; 0.5 leaves held-out code at 1.07 rather than 1.09."""
    loose_space: float = 1.0
    """Whitespace a word does not absorb: runs of two or more spaces/tabs (indentation, column
    padding) and a space before a digit (tokenizers keep digits apart from the space before)."""
    extra_utf8_byte: float = 0.5
    """Non-ASCII text: half a token per UTF-8 byte beyond the first of each character, i.e. 0.5 for
    accented Latin, Greek, Cyrillic, Hebrew, Arabic (two bytes), 1.0 for CJK, kana, hangul and most
    symbols (three bytes), 1.5 for emoji (four bytes)."""


def _byte_classes(classes: Mapping[str, str], default: str) -> bytes:
    """A `bytes.translate` table mapping each byte to its class letter (non-ASCII bytes: default)."""
    table = bytearray(default.encode() * 256)
    for chars, label in classes.items():
        for char in chars:
            table[ord(char)] = ord(label)
    return bytes(table)


# Counting runs without a per-character Python loop: translate the UTF-8 bytes into a class string
# (C speed, ~3 GB/s) and count class transitions with `bytes.count`. Each map below has a class
# for the feature and a filler for the rest, so "a run starts" is a two-byte pattern.
_LETTERS = _byte_classes({string.ascii_letters: "a"}, " ")
_CASES = _byte_classes({string.ascii_lowercase: "a", string.ascii_uppercase: "A"}, " ")
_DIGITS = _byte_classes({string.digits: "0", " \t": " "}, "x")
_PUNCT = _byte_classes({string.punctuation: "."}, " ")
_LINE_ENDS = _byte_classes({string.ascii_letters + string.digits: "a", "\n": "n"}, " ")
_SPACES = _byte_classes({" \t": " "}, "x")


_NUMBER_RUN = re.compile(rb"[0-9][0-9.,:;/\- \t]{14,}[0-9]")
_NUMBER_RUN_MIN_DIGITS = 10
_HEX_RUN = re.compile(rb"[0-9a-fA-F]{20,}")
_NOT_DIGITS = bytes(b for b in range(256) if not 48 <= b <= 57)


def _dense_digits(data: bytes) -> int:
    """Digits inside number-dense runs (`CharWeights.number_run_digit`); C speed per run."""
    total = 0
    for match in _NUMBER_RUN.finditer(data):
        digits = len(match.group().translate(None, _NOT_DIGITS))
        if digits >= _NUMBER_RUN_MIN_DIGITS:
            total += digits
    return total


def _hex_run_chars(data: bytes) -> int:
    """Characters of long hex runs that mix letters and digits (`CharWeights.hex_run_char`)."""
    total = 0
    for match in _HEX_RUN.finditer(data):
        run = match.group()
        digits = len(run.translate(None, _NOT_DIGITS))
        if 0 < digits < len(run):
            total += len(run)
    return total


class CharWeightEstimator:
    """A conservative estimate for models whose tokenizer is not available: feature counts of the
    text times `CharWeights` (documented there with the measurements), rounded up.

    Runs at C speed over the UTF-8 bytes (translate + count, no per-character Python loop):
    ~45 M chars/s, over twice raw tiktoken (bench (d)).
    """

    exact = False

    def __init__(self, weights: CharWeights | None = None) -> None:
        self.weights = weights or CharWeights()
        # The name keys the count cache: custom weights must not share the defaults' entries.
        default = self.weights == CharWeights()
        self.name = "char-weight" if default else f"char-weight-{abs(hash(self.weights)):x}"

    def count(self, text: str) -> int:
        if not text:
            return 0
        # A leading NUL (class "other" in every map) lets a run at the very start count as a
        # transition too. surrogatepass: lone surrogates (bad decodes) are counted, not raised.
        data = b"\0" + text.encode("utf-8", "surrogatepass")
        w = self.weights
        letters = data.translate(_LETTERS)
        punct = data.translate(_PUNCT)
        # Mark each digit run's first digit "1": a run of n digits is ceil(n/3) groups, i.e. its
        # first digit plus one per full triple after it.
        digits = data.translate(_DIGITS).replace(b"x0", b"x1").replace(b" 0", b" 1")
        space_before_digit = digits.count(b" 1")
        estimate = (
            w.word * letters.count(b" a")
            + w.hump * data.translate(_CASES).count(b"aA")
            + w.digit_group * (digits.count(b"1") + digits.count(b"000"))
            + w.number_run_digit * _dense_digits(data)
            + w.hex_run_char * _hex_run_chars(data)
            + w.punct_run * punct.count(b" .")
            + w.punct_char * punct.count(b".")
            + w.line_end * data.translate(_LINE_ENDS).count(b"an")
            + w.loose_space * (data.translate(_SPACES).count(b"x  ") + space_before_digit)
            + w.extra_utf8_byte * (len(data) - 1 - len(text))
        )
        return math.ceil(estimate)


# ---------------------------------------------------------------------------------------------
# Exact counting with tiktoken


class TiktokenCounter:
    """Exact counts with a tiktoken encoding."""

    exact = True

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self.name: str = encoding.name

    def count(self, text: str) -> int:
        # encode_ordinary: user text that happens to contain "<|endoftext|>" is counted as ordinary
        # text instead of raising (what `encode(text, disallowed_special=())` does, minus a check).
        return len(self._encoding.encode_ordinary(text))


# tiktoken stores a downloaded encoding under sha1(url) in its cache dir; LiteLLM ships the files
# under those names. Checking the file first guarantees no download is ever attempted (tiktoken
# would otherwise fetch from the network, without a timeout).
_ENCODING_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}


def _bundled_tiktoken_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


def _encoding_on_disk(encoding_name: str) -> bool:
    url = _ENCODING_URLS.get(encoding_name)
    if url is None:
        return False
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:  # "" disables tiktoken's cache: every load would download.
        return False
    return (Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()).is_file()


_load_lock = threading.Lock()
_counters: dict[str, CachedCounter] = {}


def counter_for_encoding(encoding_name: str) -> CachedCounter:
    """The process-wide cached counter for a tiktoken encoding, or the estimator when that encoding
    cannot be loaded offline. The first load takes ~0.1-0.3 s: keep it off the UI thread."""
    counter = _counters.get(encoding_name)
    if counter is not None:
        return counter
    with _load_lock:
        counter = _counters.get(encoding_name)
        if counter is None:
            counter = _counters[encoding_name] = CachedCounter(_load_inner(encoding_name))
        return counter


def import_tokenizer() -> None:
    """Import the tokenizer library now (milliseconds: no encoding is loaded until first use), for
    a caller about to import LiteLLM in another thread: LiteLLM imports tiktoken too, and one
    package imported by two threads at once can be seen half-initialised. A broken tiktoken is
    left for `_load_inner`, which estimates instead."""
    with contextlib.suppress(Exception):
        import tiktoken  # noqa: F401


def _load_inner(encoding_name: str) -> TokenCounter:
    bundled = _bundled_tiktoken_dir()
    if bundled is not None:
        # The same default LiteLLM applies when imported; a user's own cache dir wins.
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    if not _encoding_on_disk(encoding_name):
        return _ESTIMATOR
    try:
        import tiktoken

        return TiktokenCounter(tiktoken.get_encoding(encoding_name))
    except Exception:
        # A corrupt file or a broken tiktoken: estimate instead of failing.
        return _ESTIMATOR


_ESTIMATOR = CharWeightEstimator()


def default_counter() -> TokenCounter:
    """The process-wide counter for Foya's own encoding (the simulator's tokenizer); loaded on first
    use (~0.3 s), so keep that first call off the UI thread."""
    return counter_for_encoding(DEFAULT_ENCODING)


def estimator_counter() -> CachedCounter:
    """The process-wide cached estimator, for models no tokenizer fits."""
    counter = _counters.get(_ESTIMATOR.name)
    if counter is None:
        with _load_lock:
            counter = _counters.setdefault(_ESTIMATOR.name, CachedCounter(_ESTIMATOR))
    return counter


# ---------------------------------------------------------------------------------------------
# Model → encoding

# Provider prefixes that pass the model name through to OpenAI unchanged.
_PASS_THROUGH = re.compile(r"^(?:openai|azure)/")
_O200K = re.compile(r"^(?:gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|chatgpt-4o|o[134](?![0-9a-z]))")
_CL100K = re.compile(r"^(?:gpt-4|gpt-3\.5-turbo|gpt-35-turbo|text-embedding-3|text-embedding-ada-002)")
SIMULATOR_PREFIX = "foya-sim/"


def encoding_for_model(model: str) -> str | None:
    """The tiktoken encoding that is exact for a model, or None when none fits (then: estimate)."""
    name = model.strip().lower()
    if name.startswith(SIMULATOR_PREFIX) or name == SIMULATOR_PREFIX.rstrip("/"):
        return DEFAULT_ENCODING
    name = _PASS_THROUGH.sub("", name)
    if name.startswith("ft:"):  # fine-tunes: "ft:gpt-4o-mini:org::id"
        name = name[3:]
    if _O200K.match(name):
        return "o200k_base"
    if _CL100K.match(name):
        return "cl100k_base"
    return None


def counter_for_model(model: str) -> CachedCounter:
    """The cached counter for a model: exact where an encoding fits, else the estimator."""
    encoding = encoding_for_model(model)
    return estimator_counter() if encoding is None else counter_for_encoding(encoding)


# ---------------------------------------------------------------------------------------------
# The cache


@dataclass(frozen=True)
class CacheStats:
    entries: int
    max_entries: int


class TokenCountCache:
    """A thread-safe LRU of token counts keyed by (counter name, content key), at most
    `max_entries` long (see `CACHE_MAX_ENTRIES` for what that costs in memory).

    Lookups read the dict without the lock (a single dict operation is atomic in CPython, with or
    without the GIL); every change (LRU reorder, insert, eviction) takes the lock, so the bound
    always holds. This keeps a cold count within a few percent of raw tiktoken.
    """

    def __init__(self, max_entries: int = CACHE_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str | bytes], int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str | bytes]) -> int | None:
        value = self._entries.get(key)
        if value is not None:
            with self._lock:
                if key in self._entries:  # not evicted meanwhile
                    self._entries.move_to_end(key)
        return value

    def put(self, key: tuple[str, str | bytes], value: int) -> None:
        with self._lock:
            self._entries[key] = value
            if len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def stats(self) -> CacheStats:
        return CacheStats(len(self._entries), self.max_entries)


SHARED_CACHE = TokenCountCache()
_sha256 = hashlib.sha256


class CachedCounter:
    """Wraps any `TokenCounter`: each distinct text is counted once, then read from the cache.

    The key includes the counter's name, so counters sharing a cache must name their tokenizer
    distinctly. Two threads counting the same new text at once may both count it (counting runs
    outside the lock, so one long text never blocks other lookups); both store the same number.
    """

    def __init__(self, inner: TokenCounter, cache: TokenCountCache | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.exact = inner.exact
        self.cache = SHARED_CACHE if cache is None else cache

    def count(self, text: str) -> int:
        key: tuple[str, str | bytes]
        if len(text) < SHORT_TEXT_CHARS:
            if not text:
                return 0
            key = (self.name, text)
        else:
            key = (self.name, _sha256(text.encode("utf-8", "surrogatepass")).digest())
        value = self.cache.get(key)
        if value is None:
            value = self.inner.count(text)
            self.cache.put(key, value)
        return value


# ---------------------------------------------------------------------------------------------
# Messages


def message_text(message: Mapping[str, Any]) -> str:
    """Everything model-visible in one OpenAI-shaped message, as text to count."""
    parts: list[str] = [str(message.get("role", ""))]
    content = message.get("content")
    if isinstance(content, str) or content:
        parts.append(content_text(content, separator="\n"))
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        parts.append(str(function.get("name", "")))
        parts.append(str(function.get("arguments", "")))
    if message.get("name"):
        parts.append(str(message["name"]))
    return "\n".join(parts)


def count_messages(messages: Iterable[Mapping[str, Any]], counter: TokenCounter | None = None) -> int:
    """Tokens of a chat request's messages, including per-message framing."""
    counter = counter or default_counter()
    total = TOKENS_PER_REPLY
    for message in messages:
        total += TOKENS_PER_MESSAGE + counter.count(message_text(message))
    return total


def count_tools(tools: Iterable[Mapping[str, Any]], counter: TokenCounter | None = None) -> int:
    """Tokens of tool schemas, counted on their canonical JSON."""
    counter = counter or default_counter()
    return sum(counter.count(canonical_json(tool)) for tool in tools)


def message_tokens(message: Mapping[str, Any], counter: TokenCounter) -> int:
    """One message's tokens in a request: its framing and its text."""
    return TOKENS_PER_MESSAGE + counter.count(message_text(message))


COUNT_RULES_VERSION = 1
"""Bumped when `message_tokens` changes how it counts: counts persisted under an older version are
then not reused (`stored_count_key`)."""


def stored_count_key(counter: TokenCounter) -> str:
    """The name a message's persisted token count is stored under: the tokenizer (an encoding, or
    the estimator and its weights) and the counting rules."""
    return f"{counter.name}/{COUNT_RULES_VERSION}"


def counter_for_stored_key(key: str) -> TokenCounter | None:
    """The counter whose counts are stored under `key` (`stored_count_key`), to recount them (`foya
    verify`); None for older counting rules or a tokenizer this process cannot load (custom
    estimator weights, a missing encoding)."""
    name, _, version = key.rpartition("/")
    if version != str(COUNT_RULES_VERSION):
        return None
    if name == _ESTIMATOR.name:
        return estimator_counter()
    counter = counter_for_encoding(name)
    return counter if counter.name == name else None
