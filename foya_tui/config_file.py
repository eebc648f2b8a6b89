"""Provides the one writer of `config.toml`: a setting changed in the TUI (the theme, the approval
mode) saved into the file with its comments and layout kept (tomlkit), and the commented template
that `foya config edit` starts a missing file from.

A file that is not valid (not TOML, or a setting Foya refuses) is never overwritten: the change is
refused with one line saying so, and the file stays exactly as the user left it. The write itself
goes to a temporary file beside the config and replaces it in one step, so a crash leaves the old
file or the new one, never half of either.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

from foya_tui.settings import SettingsError, settings_from_mapping

SAVED_SETTINGS = ("theme", "approval_mode")
"""The settings the TUI changes and saves (top-level keys of `config.toml`)."""

TEMPLATE = """\
# Foya's settings. Every line below is commented out: each shows the default, so this file
# changes nothing until you uncomment a line. Unknown keys are errors (a typo never falls back
# silently); `foya config` prints what is in force. The README's "Configure" section has them all.

# model = "foya-sim/small"          # any LiteLLM model string; the offline simulator by default
# connection = "default"            # the default route's connection
# theme = "foya-dark"               # or "foya-light"; the TUI saves the theme you pick here
# approval_mode = "ask"             # read-only | ask | auto; the TUI saves /approval here
# max_retries = 2                   # retries for rate limits and connection errors
# request_timeout = 120.0           # seconds without progress before a request is abandoned

# [connections.openai]
# api_key_env = "OPENAI_API_KEY"    # the *name* of the variable holding the key; never the key

# [connections.local]
# api_base = "http://localhost:1234/v1"   # any OpenAI-compatible server

# [models."openai/qwen3-32b"]
# connection = "local"
# window = 32768                    # for models LiteLLM's table does not know

# [budget]
# handoff_ratio = 0.70              # the handoff line, a share of the input budget
# compact_ratio = 0.80              # the compaction line

# [tools]
# shell_timeout = 120.0
# max_steps = 500

# [keys]                            # remap a key by its action's id (F1 lists the actions)
# "context.compact" = "ctrl+l"
# "route.switch" = "f4"
"""


class ConfigNotSaved(SettingsError):
    """A setting could not be saved to `config.toml` (one line: which file, why, what was kept)."""


_WRITING = threading.Lock()
"""One write of the file at a time in this process (two quick changes must not interleave)."""


def ensure_config_file(config_file: Path) -> bool:
    """Create `config_file` from the commented template when it does not exist; True if created."""
    if config_file.exists():
        return False
    config_file.parent.mkdir(parents=True, exist_ok=True)
    _replace(config_file, TEMPLATE)
    return True


def save_setting(config_file: Path, name: str, value: str) -> None:
    """Set the top-level setting `name` to `value` in `config_file`, keeping every comment and
    the layout; a missing file starts from the template. Raises ConfigNotSaved, writing nothing,
    when the file is not valid as it stands or would not be valid with the new value."""
    assert name in SAVED_SETTINGS, name
    with _WRITING:
        try:
            text = config_file.read_text(encoding="utf-8") if config_file.exists() else TEMPLATE
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigNotSaved(
                f"{config_file} cannot be read ({_reason(exc)}); the {_what(name)} was not saved"
            ) from None
        try:
            document = tomlkit.parse(text)
            settings_from_mapping(document.unwrap())
        except TOMLKitError as exc:
            raise ConfigNotSaved(
                f"{config_file} is not valid TOML ({exc}); it was left as it is and the {_what(name)} "
                "was not saved"
            ) from None
        except SettingsError as exc:
            raise ConfigNotSaved(
                f"{config_file} is not valid ({exc.message}); it was left as it is and the "
                f"{_what(name)} was not saved"
            ) from None
        if document.get(name) == value:
            return
        document[name] = value
        try:
            settings_from_mapping(document.unwrap())
        except SettingsError as exc:
            raise ConfigNotSaved(f"the {_what(name)} {value!r} was not saved: {exc.message}") from None
        try:
            config_file.parent.mkdir(parents=True, exist_ok=True)
            _replace(config_file, tomlkit.dumps(document))
        except OSError as exc:
            raise ConfigNotSaved(
                f"{config_file} cannot be written ({_reason(exc)}); the {_what(name)} was not saved"
            ) from None


def _what(name: str) -> str:
    return name.replace("_", " ")


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def _replace(config_file: Path, text: str) -> None:
    """Write `text` to a temporary file beside `config_file`, then rename it over the file: the
    file is the old one or the new one at every moment. Its permissions are kept."""
    mode = config_file.stat().st_mode & 0o777 if config_file.exists() else 0o644
    descriptor, temporary = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=config_file.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, config_file)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
