"""Provides reading OpenAI-format chat transcripts (JSON array or JSONL) into importable events.

A transcript is validated completely before anything is written: a malformed file is one clear
error naming the message at fault, and no session is created (SPEC H-5). A file on disk is read a
piece at a time, twice (`open_transcript`: validate, then the events as an iterator for a batched
import), so memory holds a batch, never the file; a file the piecewise reader has any doubt about
is judged by the whole-file parser, which gives the one error (or the same messages).

Strictness: standard JSON only (`NaN` and `Infinity` are refused), a size limit (the
`import_max_bytes` setting, read no further than that), a nesting limit (`MAX_NESTING`). Tool
calls: two calls with one id in one assistant message are refused (no result could say which it
answers); a call that no tool message answers is kept, as it is common in real transcripts (an
interrupted turn): the model's view closes it with the "no result was recorded" placeholder
(`view/history.py`), as for a call interrupted in Foya itself.

`foya export`'s own JSON lines import too: the valid history's messages become imported messages
as above, and its failed or cancelled turns stay turn outcomes (shown where they happened, never
sent to the model); what belonged to how the source was managed (usage, checkpoints, compaction
records, snips, handoff reminders) is left out, as a fork leaves it out.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from foya_tui.errors import InputError
from foya_tui.runtime.model import Event, EventKind, NewArtifact, NewEvent
from foya_tui.runtime.view.history import event_message, valid_events

ROLES = ("system", "user", "assistant", "tool")
MAX_IMAGE_BYTES = 50 * 1024 * 1024
MAX_NESTING = 100
"""Deepest nesting of arrays and objects a transcript may have (messages need about 6)."""
_DATA_URL = re.compile(r"data:(image/[\w.+-]+);base64,(.*)", re.DOTALL)


class TranscriptError(InputError):
    """The transcript cannot be imported; the message says where and why, in one line."""


def _mebibytes(size: int) -> str:
    return f"{size / (1024 * 1024):,.0f} MiB" if size >= 1024 * 1024 else f"{size:,} bytes"


def read_transcript(stream: BinaryIO, max_bytes: int) -> bytes:
    """Read a transcript, never more than `max_bytes` (+1 to know it is over): `/dev/zero` or a
    runaway pipe is refused in one line instead of filling memory."""
    data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TranscriptError(
            f"the transcript is larger than {_mebibytes(max_bytes)} (the import_max_bytes setting)"
        )
    return data


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (only finite numbers are)")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_decode = _decoder.decode


def _depth(value: Any) -> int:
    """Deepest nesting of arrays and objects in a decoded value (iterative: no recursion limit)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _loads(text: str, where: str) -> Any:
    try:
        value = _decode(text)
    except RecursionError:
        raise TranscriptError(f"{where}nested more than {MAX_NESTING} levels deep") from None
    except ValueError as exc:
        raise TranscriptError(f"{where}not valid JSON ({exc})") from None
    if _depth(value) > MAX_NESTING:
        raise TranscriptError(f"{where}nested more than {MAX_NESTING} levels deep")
    return value


@dataclass(frozen=True)
class Transcript:
    events: tuple[NewEvent, ...]
    artifacts: tuple[NewArtifact, ...]
    title: str


def _image(part: Mapping[str, Any], where: str) -> NewArtifact | str:
    """An image part as an artifact (data URLs), or a note saying why it could not be kept."""
    url = part.get("image_url")
    url = url.get("url") if isinstance(url, Mapping) else url
    if not isinstance(url, str) or not url:
        return "[image not imported: the transcript gave no image data]"
    match = _DATA_URL.fullmatch(url.strip())
    if match is None:
        # Foya never fetches remote content on import; the note keeps the reference visible.
        return f"[image not imported: {url[:200]} is not embedded data, and Foya does not fetch URLs]"
    try:
        data = base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        raise TranscriptError(f"{where}: an image data URL is not valid base64") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise TranscriptError(f"{where}: an image is larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MiB")
    return NewArtifact(data=data, mime=match.group(1))


def _content(content: Any, where: str) -> tuple[str | None, list[NewArtifact]]:
    """Text content and image artifacts of a message (SPEC I-1: images never silently dropped)."""
    if content is None or isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise TranscriptError(f"{where}: content must be a string, null or a list of parts")
    texts: list[str] = []
    images: list[NewArtifact] = []
    for part in content:
        if not isinstance(part, Mapping):
            raise TranscriptError(f"{where}: content parts must be objects")
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") in ("image_url", "input_image", "image"):
            image = _image(part, where)
            if isinstance(image, str):
                texts.append(image)
            else:
                images.append(image)
        else:
            raise TranscriptError(f"{where}: unsupported content part type {part.get('type')!r}")
    return "\n".join(texts), images


def _tool_calls(raw: Any, where: str) -> list[dict[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TranscriptError(f"{where}: tool_calls must be a list")
    calls: list[dict[str, str]] = []
    for index, call in enumerate(raw, 1):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(call.get("id"), str) or not call["id"]:
            raise TranscriptError(f"{where}: tool call {index} needs an id and a function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise TranscriptError(f"{where}: tool call {index} has no function name")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if any(seen["id"] == call["id"] for seen in calls):
            raise TranscriptError(
                f"{where}: tool call id {call['id']!r} appears twice in one message "
                "(a result could not say which call it answers)"
            )
        calls.append({"id": call["id"], "name": name, "arguments": arguments})
    return calls


def _parse_items(text: str) -> list[tuple[str, Any]]:
    """(where, item) pairs: a JSON array, else one JSON value per non-empty line."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        items = _loads(text, "")
        return [(f"message {index}", item) for index, item in enumerate(items, 1)]
    parsed = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parsed.append((f"line {number}", _loads(line, f"line {number}: ")))
    return parsed


OUTCOMES = ("failed", "cancelled")


def _is_export(items: list[tuple[str, Any]]) -> bool:
    first = items[0][1] if items else None
    return isinstance(first, Mapping) and {"seq", "kind", "payload"} <= set(first)


def _from_export(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """`foya export` records as transcript items: OpenAI messages for the valid history's
    messages, `("outcome", payload)` pairs for turn outcomes; everything else left out."""
    by_seq: dict[int, str] = {}
    events: list[Event] = []
    for where, record in items:
        if not isinstance(record, Mapping) or not {"seq", "kind", "payload"} <= set(record):
            raise TranscriptError(f"{where}: a `foya export` record needs seq, kind and payload")
        seq, kind, payload = record["seq"], record["kind"], record["payload"]
        known = kind in EventKind._value2member_map_
        if not isinstance(seq, int) or not isinstance(payload, Mapping) or not known or "problem" in record:
            continue  # an unreadable row of the source, or a kind this Foya does not know
        by_seq[seq] = where
        events.append(Event("", seq, EventKind(kind), payload, str(record.get("created_at", ""))))
    converted: list[tuple[str, Any]] = []
    for event in valid_events(events):
        where = by_seq[event.seq]
        if event.kind is EventKind.TURN_OUTCOME:
            if event.payload.get("outcome") in OUTCOMES and isinstance(event.payload.get("reason"), str):
                converted.append((where, ("outcome", dict(event.payload))))
            continue
        message = event_message(event)
        if message is None or event.kind is EventKind.HANDOFF:
            continue
        item = message.to_openai()
        if message.attachments:  # the bytes are not in the export: the references say what was there
            item["content"] = (message.content or "") + "\n[image not imported: not in the export]"
        converted.append((where, item))
    return converted


class _Builder:
    """Turns validated messages into imported-message events, one at a time, in order: the
    pending tool calls, the title and the image artifacts carry from one message to the next."""

    def __init__(self, source: str, *, keep_artifacts: bool = True) -> None:
        self.source = source
        self.keep_artifacts = keep_artifacts
        self.artifacts: list[NewArtifact] = []
        self.pending: list[str] = []  # unanswered call ids of the latest assistant message
        self.title = ""
        self.count = 0

    def event(self, where: str, item: Any) -> NewEvent:
        if isinstance(item, tuple):  # a turn outcome of a `foya export` (see `_from_export`)
            return NewEvent(EventKind.TURN_OUTCOME, item[1])
        if not isinstance(item, Mapping):
            raise TranscriptError(f"{where}: a message must be a JSON object")
        role = item.get("role")
        if role not in ROLES:
            raise TranscriptError(f"{where}: role must be one of {', '.join(ROLES)}, got {role!r}")
        content, images = _content(item.get("content"), where)
        payload: dict[str, Any] = {"role": role, "content": content}
        if images:
            payload["attachments"] = [image.ref.to_payload() for image in images]
            if self.keep_artifacts:
                self.artifacts.extend(images)
        if role == "assistant":
            calls = _tool_calls(item.get("tool_calls"), where)
            if calls:
                payload["tool_calls"] = calls
            self.pending = [call["id"] for call in calls]
        elif role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise TranscriptError(f"{where}: a tool message needs a tool_call_id")
            if call_id not in self.pending:
                raise TranscriptError(
                    f"{where}: tool_call_id {call_id!r} answers no open call of the last assistant message"
                )
            self.pending.remove(call_id)  # ids may repeat in later turns: each group is matched on its own
            payload["tool_call_id"] = call_id
        else:
            self.pending = []
            if role == "user" and not self.title and payload["content"]:
                self.title = " ".join(payload["content"].split())[:60]
        if isinstance(item.get("name"), str):
            payload["name"] = item["name"]
        payload["source"] = self.source
        self.count += 1
        return NewEvent(EventKind.IMPORTED_MESSAGE, payload)

    def title_or_default(self) -> str:
        return self.title or f"imported from {self.source}"


def parse_transcript(data: bytes, source: str, *, max_bytes: int | None = None) -> Transcript:
    """Validate a whole transcript and turn it into imported-message events."""
    if max_bytes is not None and len(data) > max_bytes:
        raise TranscriptError(
            f"the transcript is larger than {_mebibytes(max_bytes)} (the import_max_bytes setting)"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"not valid UTF-8 (byte {exc.start})") from None
    items = _parse_items(text)
    if _is_export(items):
        items = _from_export(items)
    if not items:
        raise TranscriptError("the file holds no messages")
    builder = _Builder(source)
    events = [builder.event(where, item) for where, item in items]
    return Transcript(
        events=tuple(events), artifacts=tuple(builder.artifacts), title=builder.title_or_default()
    )


READ_CHUNK = 1024 * 1024
"""Bytes read at a time by the piecewise reader."""

_JSON_SPACE = " \t\n\r"
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
"""What `str.splitlines` splits on: a line ends with one of them (\\r\\n counts as one)."""


class _Unsure(Exception):
    """The piecewise reader leaves this file to the whole-file parser (an error, or a form it
    does not read): that parser's verdict is the one given."""


def _pieces(stream: BinaryIO, max_bytes: int) -> Iterator[str]:
    """The file's text a chunk at a time (UTF-8, a leading BOM dropped), never past `max_bytes`."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    read = 0
    while True:
        chunk = stream.read(READ_CHUNK)
        read += len(chunk)
        if read > max_bytes:
            raise _Unsure
        try:
            text = decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError:
            raise _Unsure from None
        if text:
            yield text
        if not chunk:
            return


class _Reader:
    """A text buffer over `_pieces`, extended on demand and trimmed as items are taken."""

    def __init__(self, stream: BinaryIO, max_bytes: int) -> None:
        self._pieces = _pieces(stream, max_bytes)
        self.text = ""
        self.at = 0
        self.done = False

    def more(self) -> bool:
        """Read one more piece (dropping what was taken); False at the end of the file."""
        if self.done:
            return False
        piece = next(self._pieces, None)
        if piece is None:
            self.done = True
            return False
        self.text = self.text[self.at :] + piece
        self.at = 0
        return True

    def skip_space(self) -> str:
        """The next character after JSON whitespace ("" at the end of the file)."""
        while True:
            while self.at < len(self.text) and self.text[self.at] in _JSON_SPACE:
                self.at += 1
            if self.at < len(self.text):
                return self.text[self.at]
            if not self.more():
                return ""


def _stream_items(stream: BinaryIO, max_bytes: int) -> Iterator[tuple[str, Any]]:
    """(where, item) pairs as `_parse_items` gives them, read a piece at a time; raises _Unsure
    (or TranscriptError) wherever the whole-file parser must judge."""
    reader = _Reader(stream, max_bytes)
    while not reader.text.lstrip() and reader.more():
        pass
    if reader.text.lstrip().startswith("["):
        yield from _array_items(reader)
    else:
        yield from _line_items(reader)


def _array_items(reader: _Reader) -> Iterator[tuple[str, Any]]:
    if reader.skip_space() != "[":
        raise _Unsure  # other whitespace before the array: the whole-file parser says what it is
    reader.at += 1
    index = 0
    while True:
        following = reader.skip_space()
        if following == "]" and index == 0:
            raise _Unsure  # an empty array: no messages
        while True:
            try:
                item, end = _decoder.raw_decode(reader.text, reader.at)
            except RecursionError:
                raise _Unsure from None
            except ValueError:
                if reader.more():
                    continue  # the item may go on in the next piece
                raise _Unsure from None
            if end < len(reader.text) or reader.done:
                break
            if not reader.more():
                break
        if _depth(item) >= MAX_NESTING:
            raise _Unsure
        index += 1
        reader.at = end
        yield f"message {index}", item
        following = reader.skip_space()
        reader.at += 1
        if following == "]":
            if reader.skip_space() != "":
                raise _Unsure  # something after the array
            return
        if following != ",":
            raise _Unsure


def _line_items(reader: _Reader) -> Iterator[tuple[str, Any]]:
    number = 0
    while True:
        lines = reader.text[reader.at :].splitlines(keepends=True)
        # The last piece may go on (or be half of a \r\n): kept until the file ends.
        complete = lines if reader.done else lines[:-1]
        for line in complete:
            number += 1
            # Without its line break, as `str.splitlines()` gives lines to the whole-file parser.
            text = line.rstrip(_LINE_BREAKS)
            if text.strip():
                yield f"line {number}", _loads(text, f"line {number}: ")
        reader.at += sum(len(line) for line in complete)
        if reader.done:
            return
        reader.more()


@dataclass(frozen=True)
class TranscriptFile:
    """A transcript on disk, validated in full: its events are read again, a piece at a time,
    when `events()` is iterated (a batched import holds one batch, never the file)."""

    path: Path
    source: str
    max_bytes: int
    title: str
    count: int
    artifacts: tuple[NewArtifact, ...]

    def events(self) -> Iterator[NewEvent]:
        builder = _Builder(self.source, keep_artifacts=False)
        with self.path.open("rb") as stream:
            for where, item in _stream_items(stream, self.max_bytes):
                yield builder.event(where, item)
        if builder.count != self.count:
            raise TranscriptError(f"{self.path.name} changed while it was imported")


def open_transcript(path: Path, source: str, *, max_bytes: int) -> TranscriptFile | Transcript:
    """Validate a transcript file read a piece at a time (raises TranscriptError, having written
    nothing). A file that reader has any doubt about is read whole and parsed as `parse_transcript`
    does, so the error (or the messages) are exactly that parser's; raises OSError when the file
    cannot be read."""
    builder = _Builder(source)
    try:
        if not path.is_file():
            raise _Unsure  # a pipe (`<(…)`) cannot be read twice: read whole, as stdin is
        with path.open("rb") as stream:
            for where, item in _stream_items(stream, max_bytes):
                builder.event(where, item)
        if builder.count == 0:
            raise _Unsure
    except (_Unsure, TranscriptError):
        with path.open("rb") as stream:
            data = read_transcript(stream, max_bytes)
        return parse_transcript(data, source, max_bytes=max_bytes)
    return TranscriptFile(
        path, source, max_bytes, builder.title_or_default(), builder.count, tuple(builder.artifacts)
    )
