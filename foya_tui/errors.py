"""Provides the one error base of Foya: every error raised for a person to read derives from
`FoyaError`, whose message is one line and whose exit code says what kind of failure it was.

- `InputError` (exit 2): what the user asked for cannot be done as asked — a bad flag, an unknown
  session, a malformed file, a bad config value. The command wrote nothing.
- `ProviderError` (exit 1, in `runtime/providers/errors.py`): the model provider failed; its
  classified failure says how.
- Any other `FoyaError` (exit 1): the operation failed for a reason the user can act on.

Anything else that escapes is a bug, and the CLI lets it show as one.
"""

from __future__ import annotations

from typing import ClassVar

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class FoyaError(Exception):
    """An error for a person to read: `message` is one line, `exit_code` what the CLI returns."""

    exit_code: ClassVar[int] = EXIT_FAILED

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else type(self).__name__


class InputError(FoyaError, ValueError):
    """Bad input from the user: nothing was written (exit 2). A ValueError too, so code that
    validates values keeps reading naturally."""

    exit_code: ClassVar[int] = EXIT_USAGE


__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "FoyaError", "InputError"]
