"""Where a ledger home lives: --home, else $LEDGER_HOME, else the platform's user data dir."""

from __future__ import annotations

import os
from pathlib import Path


def resolve_home(home: str | os.PathLike[str] | None = None, env: os._Environ[str] | dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if home:
        return Path(home).expanduser()
    if env.get("LEDGER_HOME"):
        return Path(env["LEDGER_HOME"]).expanduser()
    import platformdirs  # only paid for when no home is given

    return Path(platformdirs.user_data_dir("ledger", appauthor=False))
