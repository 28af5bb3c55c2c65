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


# what a ledger home holds; an existing directory with none of these (and not empty) is
# somebody else's (a project, a mistyped path), and ledger writes nothing into it
HOME_MARKERS = frozenset({"runs", "sessions", "sources", "index.sqlite"})
HOME_HINT = ("record a run with `ledger run -- CMD` (it creates the home), or point --home / LEDGER_HOME "
             "at an existing ledger home")


def home_problem(home: str | os.PathLike[str]) -> str | None:
    """Why `home` cannot be read as a ledger home, or None: "missing", "not a directory",
    unreadable, or "not a ledger home" (a non-empty directory without any HOME_MARKERS)."""
    import stat as stat_mod

    try:
        st = os.stat(home)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if not stat_mod.S_ISDIR(st.st_mode):
        return "not a directory"
    try:
        with os.scandir(home) as it:
            names = [e.name for e in it]
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if names and not HOME_MARKERS.intersection(names):
        return "not a ledger home (it has no runs/ directory)"
    return None


def check_home(home: str | os.PathLike[str]) -> None:
    """Raise LedgerError (with the hint) unless `home` can be read as a ledger home."""
    from ledger.errors import LedgerError

    why = home_problem(home)
    if why == "missing":
        raise LedgerError(f"no ledger home at {home}", hint=HOME_HINT)
    if why is not None:
        raise LedgerError(f"the ledger home {home} is {why}", hint=HOME_HINT)
