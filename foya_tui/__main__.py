"""Provides `python -m foya_tui`, the same entry point as the `foya` command."""

from __future__ import annotations

from foya_tui.cli import main

raise SystemExit(main())
