"""Provides canonical JSON and SHA-256 helpers used for ids and source digests."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal values always give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """SHA-256 of a value's canonical JSON."""
    return sha256_hex(canonical_json(value))


CHAIN_START = sha256_hex(b"")
"""The running digest before any message event (equal to the digest of nothing)."""


def chained_digest(previous: str, seq: int, kind: str, payload: str) -> str:
    """The running digest after one message event: SHA-256 of the previous running digest and the
    event exactly as stored (seq, kind, payload text). A prefix's digest is then its last event's."""
    digest = hashlib.sha256(bytes.fromhex(previous))
    digest.update(f"{seq}\t{kind}\t".encode())
    digest.update(payload.encode("utf-8", "surrogatepass"))
    digest.update(b"\n")
    return digest.hexdigest()
