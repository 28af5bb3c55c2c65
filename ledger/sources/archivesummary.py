"""What an import reports (ClientSummary with its problems, gaps and repairs), and the record
base class the archive's records share."""

from __future__ import annotations

from typing import Any


class Record:
    """A record class as @dataclass makes it (fields set by __init__, ==, repr, to_plain for
    JSON) but written out: a dataclass compiles its methods when its module is imported, and
    this module's six cost ~3 ms of every reader's start (issue 15: a warm `ledger report`)."""

    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # (mutable, as a dataclass without frozen)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"

    def to_plain(self) -> dict[str, Any]:
        """dataclasses.asdict: the fields, records and lists of records within made plain."""
        return {k: _plain(getattr(self, k)) for k in self.__slots__}


def _plain(v: Any) -> Any:
    if isinstance(v, Record):
        return v.to_plain()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


class Problem(Record):
    __slots__ = ("path", "reason")

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason


class Gap(Record):
    __slots__ = ("path", "archive", "generation", "reason")

    def __init__(self, path: str, archive: str, generation: int, reason: str) -> None:
        self.path = path
        self.archive = archive
        self.generation = generation
        self.reason = reason


class Repair(Record):
    """An archive file written again from its log (ledger import, issue 26)."""

    __slots__ = ("archive", "log", "reason", "aside")

    def __init__(self, archive: str, log: str, reason: str, aside: str | None = None) -> None:
        self.archive = archive  # below sources/<client>/
        self.log = log  # the log it was copied from
        self.reason = reason  # what was wrong with it
        self.aside = aside  # where the damaged file was kept (below sources/<client>/), if it existed


class ClientSummary(Record):
    __slots__ = ("client", "roots", "files", "unchanged", "new_files", "new_bytes", "read_bytes", "waiting",
                 "generations", "gaps", "skipped", "notes", "repaired")

    def __init__(self, client: str, roots: list[str] | None = None, files: int = 0, unchanged: int = 0,
                 new_files: int = 0, new_bytes: int = 0, read_bytes: int = 0, waiting: int = 0, generations: int = 0,
                 gaps: list[Gap] | None = None, skipped: list[Problem] | None = None,
                 notes: list[str] | None = None, repaired: list[Repair] | None = None) -> None:
        self.client = client
        self.roots = [] if roots is None else roots
        self.files = files  # logs found
        self.unchanged = unchanged  # logs skipped on their stat alone
        self.new_files = new_files  # logs archived for the first time
        self.new_bytes = new_bytes  # bytes appended to the archive
        self.read_bytes = read_bytes  # bytes read from the logs (new bytes plus prefix/tail checks)
        self.waiting = waiting  # logs whose last line is torn (a live session): it waits for its newline
        self.generations = generations  # new generations (each an evidence gap)
        self.gaps: list[Gap] = [] if gaps is None else gaps
        self.skipped: list[Problem] = [] if skipped is None else skipped
        self.notes: list[str] = [] if notes is None else notes
        self.repaired: list[Repair] = [] if repaired is None else repaired

    def to_dict(self) -> dict[str, Any]:
        return _printable(self.to_plain())


def _printable(obj: Any) -> Any:
    """Paths may hold bytes that are not UTF-8 (surrogate escapes): shown as \\udcXX in JSON."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return obj.encode("utf-8", "surrogatepass").decode("utf-8", "backslashreplace")
    if isinstance(obj, dict):
        return {k: _printable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_printable(v) for v in obj]
    return obj
