"""Provides the classification of provider failures (SPEC C-2) and secret redaction.

Only input overflow may trigger compaction; rate limits, quota errors and output limits never
do. Classification works on what any exception carries (class names, status code, body), so
this module does not import LiteLLM.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foya_tui.errors import FoyaError


class FailureKind(StrEnum):
    INPUT_OVERFLOW = "input_overflow"
    RATE_LIMIT = "rate_limit"
    QUOTA = "quota"
    OUTPUT_LIMIT = "output_limit"
    AUTH = "auth"
    CONNECTION = "connection"
    OTHER = "other"


RETRYABLE = frozenset({FailureKind.RATE_LIMIT, FailureKind.CONNECTION})

_SUMMARY = {
    FailureKind.INPUT_OVERFLOW: "the request is larger than the model's context window",
    FailureKind.RATE_LIMIT: "the provider is rate limiting requests",
    FailureKind.QUOTA: "the provider account has no quota or credit left",
    FailureKind.OUTPUT_LIMIT: "the reply was cut off at the output token limit",
    FailureKind.AUTH: "the provider rejected the credentials",
    FailureKind.CONNECTION: "the provider could not be reached or timed out",
    FailureKind.OTHER: "the provider request failed",
}


@dataclass(frozen=True)
class ProviderFailure:
    kind: FailureKind
    detail: str
    """The provider's own words, redacted and on one line."""
    status_code: int | None = None
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    @property
    def message(self) -> str:
        """One clear sentence for the user, with the provider's detail after it."""
        summary = _SUMMARY[self.kind]
        return f"{summary}: {self.detail}" if self.detail else summary


class ProviderError(FoyaError):
    """Raised by provider clients; carries the classified failure."""

    def __init__(self, failure: ProviderFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


# Body codes and types that mean "input too long", whatever the message says.
_OVERFLOW_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "string_above_max_length"}
)
_OVERFLOW_PATTERNS = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|exceeds? the (?:available )?context"
    r"|context size|prompt is too long|input is too long|too many (?:input )?tokens|reduce the length of the"
    r"|input length .* exceeds|exceeds the maximum (?:number of )?tokens",
    re.IGNORECASE,
)
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "quota_exceeded"})
_QUOTA_PATTERNS = re.compile(
    r"insufficient[_ ]quota|exceeded your current quota|billing|credit balance|out of credits|quota exceeded",
    re.IGNORECASE,
)
_CONNECTION_CLASSES = frozenset(
    {
        "APIConnectionError",
        "Timeout",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "TimeoutError",
        "ConnectionError",
        "RemoteProtocolError",
        "ServiceUnavailableError",
    }
)
_AUTH_CLASSES = frozenset({"AuthenticationError", "PermissionDeniedError"})


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it wraps (LiteLLM wraps, and keeps the original in several places)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        wrapped = getattr(current, "original_exception", None)
        current = (
            wrapped if isinstance(wrapped, BaseException) else (current.__cause__ or current.__context__)
        )
    return chain


def _as_mapping(candidate: Any) -> Mapping[str, Any] | None:
    if isinstance(candidate, Mapping):
        return candidate
    if isinstance(candidate, (str, bytes)) and candidate:
        try:
            parsed = json.loads(candidate)
        except ValueError:
            return None
        return parsed if isinstance(parsed, Mapping) else None
    return None


def _body_of(exc: BaseException) -> Mapping[str, Any]:
    """The provider's JSON error body, from wherever LiteLLM or the SDK kept it.

    LiteLLM 1.110 fills `.body` only sometimes; the HTTP response (`.response.text`) and the
    wrapped SDK error (`__context__.body`) are more reliable.
    """
    for link in _exception_chain(exc):
        for candidate in (
            getattr(link, "body", None),
            getattr(getattr(link, "response", None), "text", None),
        ):
            try:
                found = _as_mapping(candidate)
            except Exception:  # a response whose body was never read raises on .text
                found = None
            if found:
                return found
    # Last resort: LiteLLM often folds the body into its message text.
    text = str(getattr(exc, "message", "") or exc)
    start = text.find("{")
    if start >= 0:
        try:
            parsed, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            return {}
        if isinstance(parsed, Mapping):
            return parsed
    return {}


def _codes(body: Mapping[str, Any]) -> set[str]:
    inner = body.get("error", body)
    if not isinstance(inner, Mapping):
        return set()
    return {str(inner.get(key)).lower() for key in ("code", "type", "status") if inner.get(key) is not None}


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        value = float(headers.get("retry-after"))
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def classify_exception(exc: BaseException, secrets: Iterable[str] = ()) -> ProviderFailure:
    """Classify any exception raised while talking to a provider."""
    names = _class_names(exc)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    body = _body_of(exc)
    codes = _codes(body)
    text = str(getattr(exc, "message", "") or exc)
    detail = one_line(redact(text, secrets))

    def failure(kind: FailureKind) -> ProviderFailure:
        return ProviderFailure(kind=kind, detail=detail, status_code=status, retry_after=_retry_after(exc))

    if "ContextWindowExceededError" in names or codes & _OVERFLOW_CODES:
        return failure(FailureKind.INPUT_OVERFLOW)
    if codes & _QUOTA_CODES or (status == 429 and _QUOTA_PATTERNS.search(text)):
        return failure(FailureKind.QUOTA)
    if status == 429 or "RateLimitError" in names:
        return failure(FailureKind.RATE_LIMIT)
    if status in (400, 413) and _OVERFLOW_PATTERNS.search(text):
        return failure(FailureKind.INPUT_OVERFLOW)
    if status in (401, 403) or names & _AUTH_CLASSES:
        return failure(FailureKind.AUTH)
    if any(isinstance(link, json.JSONDecodeError) for link in _exception_chain(exc)):
        # A 200 whose body is not JSON: retrying will not make the provider speak JSON.
        return ProviderFailure(
            kind=FailureKind.OTHER,
            detail="the provider's reply was not valid JSON",
            status_code=status,
        )
    if names & _CONNECTION_CLASSES or isinstance(exc, (TimeoutError, ConnectionError)):
        return failure(FailureKind.CONNECTION)
    return failure(FailureKind.OTHER)


def output_limit_failure() -> ProviderFailure:
    """`finish_reason == "length"`: the reply is kept, but the user must know it was cut."""
    return ProviderFailure(kind=FailureKind.OUTPUT_LIMIT, detail="")


_SECRET_PATTERNS = re.compile(
    r"(sk-[A-Za-z0-9_\-]{6,}|(?i:bearer)\s+[A-Za-z0-9._\-]{8,}|(?i:(?:api[_-]?key|token|key)=)[^\s&\"']+)"
)


SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_KEY")
"""Environment variables whose values are secrets: LiteLLM's standard ones (`OPENAI_API_KEY`,
`ANTHROPIC_API_KEY`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`'s kin …) and any other of these shapes."""
SECRET_MIN_CHARS = 8
"""Shorter values ("1", "true") are not keys, and masking them would garble ordinary words."""


def environment_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """The values of every secret-named variable of the environment, non-trivial ones only."""
    env = os.environ if env is None else env
    return [
        value
        for name, value in env.items()
        if name.upper().endswith(SECRET_SUFFIXES) and len(value.strip()) >= SECRET_MIN_CHARS
    ]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask API keys: the configured secrets (the `api_key_env` key) and the value of every
    secret-named environment variable, by value, then anything shaped like a key.

    The one redaction for anything a provider says: LiteLLM reads keys from the standard variables
    when no `api_key_env` is set, and a provider may echo a key in its error body, which would
    otherwise reach an immutable diagnostic event, `export`, `inspect --json` and stderr.
    """
    known = {secret for secret in secrets if secret and len(secret) >= 4}
    known.update(environment_secrets())
    for secret in sorted(known, key=len, reverse=True):  # a longer key is masked whole first
        text = text.replace(secret, "***")
    return _SECRET_PATTERNS.sub("***", text)


_LIBRARY_PREFIXES = re.compile(r"\blitellm\.\w+:\s*")


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace, drop LiteLLM's class-name prefixes and cap length: errors are one line."""
    flat = " ".join(_LIBRARY_PREFIXES.sub("", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
