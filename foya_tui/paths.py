"""Provides the one place that knows Foya's directories (data, config, database).

Nothing here touches the disk at import time: callers resolve paths, then create what they need.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

APP_NAME = "foya"
DATABASE_FILENAME = "foya.sqlite3"
CONFIG_FILENAME = "config.toml"


@dataclass(frozen=True)
class FoyaPaths:
    """Where Foya keeps its files.

    `FOYA_HOME` puts everything (database and config) under one folder, which tests and
    portable installs use; otherwise platformdirs chooses the per-user locations.
    """

    data_dir: Path
    config_dir: Path
    database: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / CONFIG_FILENAME


def resolve_paths(env: Mapping[str, str] | None = None, database: str | Path | None = None) -> FoyaPaths:
    """Resolve Foya's paths from `FOYA_HOME`, platformdirs and an explicit `--db` override."""
    env = os.environ if env is None else env
    home = env.get("FOYA_HOME")
    if home:
        data_dir = config_dir = Path(home).expanduser()
    else:
        # Imported here: platformdirs is cheap, but keeping this module import-free of it lets
        # FOYA_HOME users (tests, CI) never depend on the platform lookup at all.
        import platformdirs

        data_dir = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
        config_dir = Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
    db_path = Path(database).expanduser() if database else data_dir / DATABASE_FILENAME
    return FoyaPaths(data_dir=data_dir, config_dir=config_dir, database=db_path)
