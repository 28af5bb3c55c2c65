"""Where a ledger home lives: --home, else $LEDGER_HOME, else the platform's user data dir."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence


def resolve_home(home: str | os.PathLike[str] | None = None, env: os._Environ[str] | dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if home:
        return Path(home).expanduser()
    if env.get("LEDGER_HOME"):
        return Path(env["LEDGER_HOME"]).expanduser()
    import platformdirs  # only paid for when no home is given

    return Path(platformdirs.user_data_dir("ledger", appauthor=False))


def home_named(home: str | os.PathLike[str] | None = None, env: os._Environ[str] | dict[str, str] | None = None) -> bool:
    """Whether the user named the home (--home, $LEDGER_HOME) rather than ledger taking the
    platform's default: a reader indexes the default home only into its own index, never
    into a database named for something else (issue 32: a team's PostgreSQL)."""
    env = os.environ if env is None else env
    return bool(home) or bool(env.get("LEDGER_HOME"))


# what a ledger home holds; an existing directory with none of these (and not empty) is
# somebody else's (a project, a mistyped path), and ledger writes nothing into it
HOME_MARKERS = frozenset({"runs", "sessions", "sources", "index.sqlite", "home-id.json"})
HOME_HINT = ("record a run with `ledger run -- CMD` (it creates the home), or point --home / LEDGER_HOME "
             "at an existing ledger home")


def missing_home_hint(agent_logs: Sequence[str] = ()) -> str:
    """The hint for a home that does not exist. On a machine with agent logs (`agent_logs`:
    the clients' names, ledger.sources.logdirs.clients_with_logs) the first step is `ledger
    import`, which creates the home from them."""
    if not agent_logs:
        return HOME_HINT
    return (f"this machine has {' and '.join(agent_logs)} logs: `ledger import` archives them into a new home "
            "(then `ledger report`); or " + HOME_HINT)


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


def check_home(home: str | os.PathLike[str], missing_hint: Callable[[], str] | None = None) -> None:
    """Raise LedgerError (with the hint) unless `home` can be read as a ledger home
    (`missing_hint`: the hint of a home that does not exist, asked only then)."""
    from ledger.errors import LedgerError

    why = home_problem(home)
    if why == "missing":
        raise LedgerError(f"no ledger home at {home}", hint=missing_hint() if missing_hint else HOME_HINT)
    if why is not None:
        raise LedgerError(f"the ledger home {home} is {why}", hint=HOME_HINT)


# --------------------------------------------------------------------------------------
# identity (issue 11): a home is known to a shared index by an id written once into it,
# never by its path (two machines share paths; one home is reached by many paths)

HOME_ID_FILE = "home-id.json"


def read_home_uid(home: str | os.PathLike[str]) -> str | None:
    """The home's id from `home-id.json`, or None when it has none yet. A file that is not
    ledger's (a symlink, not JSON, no id) raises LedgerError: ledger never replaces it."""
    import json

    from ledger.errors import LedgerError

    path = os.path.join(home, HOME_ID_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerError(f"cannot read the home's id {path}: {exc.strerror}",
                          hint="it must be a regular file written by ledger; move it aside and run `ledger index`") from None
    try:
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        uid = canonical_uuid(json.loads(data)["home_id"])
    except (ValueError, KeyError, TypeError):
        raise LedgerError(f"the home's id file {path} is damaged",
                          hint="move it aside and run `ledger index` (the home gets a new id; "
                               "`ledger homes forget` removes the old one from a shared index)") from None
    return uid


_HEX = frozenset("0123456789abcdef")


def canonical_uuid(value: str) -> str:
    """str(uuid.UUID(value)): the id in its canonical form (ValueError, TypeError as UUID
    raises them). One already canonical (every id ledger writes) is taken as it is, without
    importing uuid (with platform: ~11 M instructions of every reader of a home with an id)."""
    if (type(value) is str and len(value) == 36 and value[8] == value[13] == value[18] == value[23] == "-"
            and _HEX.issuperset(value.replace("-", "")) and value.count("-") == 4):
        return value
    import uuid

    return str(uuid.UUID(value))


def ensure_home_uid(home: str | os.PathLike[str]) -> str | None:
    """The home's id, written once (`home-id.json`, linked into place so two processes agree
    on the first one written). None when the home cannot be written (a read-only or another
    user's home): its caller falls back to an id derived from the path."""
    import json
    import socket
    import uuid

    uid = read_home_uid(home)
    if uid is not None:
        return uid
    final = os.path.join(home, HOME_ID_FILE)
    tmp = os.path.join(home, f".{HOME_ID_FILE}.{os.getpid()}.tmp")
    # where the id was made (issue 32): a copy of this file in another home (`cp -a`, rsync)
    # is told apart from the home itself by `ledger push` (home_origin)
    data = json.dumps({"schema_version": 1, "home_id": str(uuid.uuid4()), "created_on": socket.gethostname(),
                       "path": os.path.realpath(home), "machine": machine_id()}, indent=2).encode() + b"\n"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return None
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        except OSError:  # (a full disk: no id yet, as for a read-only home)
            return None
        finally:
            os.close(fd)
        try:
            os.link(tmp, final)  # fails if another process wrote one first: theirs wins
        except FileExistsError:
            pass
        except OSError:
            return None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return read_home_uid(home)


def home_origin(home: str | os.PathLike[str]) -> tuple[str, str] | None:
    """(path, machine) where the home's id was made, from `home-id.json`; None when the file
    does not say (written before issue 32) or is missing."""
    import json

    try:
        fd = os.open(os.path.join(home, HOME_ID_FILE), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        data = json.loads(os.read(fd, 4096))
    except ValueError:
        return None
    finally:
        os.close(fd)
    path, machine = (data.get("path"), data.get("machine")) if isinstance(data, dict) else (None, None)
    return (path, machine) if isinstance(path, str) and isinstance(machine, str) else None


def machine_id() -> str:
    """This machine, for telling apart homes at the same path on two machines:
    $LEDGER_MACHINE_ID, else a hash of /etc/machine-id and the host name."""
    env = os.environ.get("LEDGER_MACHINE_ID")
    if env:
        return env
    try:
        with open("/etc/machine-id", "rb") as f:
            mid = f.read(256).strip()
    except OSError:
        mid = b""
    # the host name as socket.gethostname() says it (gethostname(2) is uname's nodename on
    # POSIX), without importing socket on every reader's path (~14 M instructions)
    return _sha256(mid + b"\0" + os.uname().nodename.encode()).hexdigest()[:16]


def _sha256(data: bytes) -> Any:
    """hashlib.sha256(data): CPython's own SHA-256 when it has one (hashlib loads OpenSSL:
    ~11 M instructions of every reader, for one 60-byte hash), else hashlib's."""
    try:
        from _sha256 import sha256  # (CPython 3.11; 3.12 has it in _sha2)
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[no-redef]
        except ImportError:
            from hashlib import sha256
    return sha256(data)
