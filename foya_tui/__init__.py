"""Provides the Foya package: a terminal workstation for long LLM-agent sessions."""

from __future__ import annotations

__version__ = "0.1.0"
