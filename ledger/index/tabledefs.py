"""Declarative-looking table classes that build SQLAlchemy Core tables, without the ORM.

The schema reads best as classes (`home_id: Mapped[int] = mapped_column(...)`), but ledger
never maps rows to objects: every query is Core, every table is used as `Model.__table__`.
SQLAlchemy's ORM costs ~0.6 G instructions to import and to map the classes (more than
`ledger --help` as a whole), paid by every command that writes the index. This module
reads the same declarations and builds the same `Table`s (tests/test_tabledefs.py compares
the DDL with the ORM's on SQLite and PostgreSQL, and tests/test_migrations.py the schema
with the migrations').

The ORM's rules kept: a column's name is its attribute; `Mapped[X | None]` is nullable and
`Mapped[X]` is not, unless `nullable=` says otherwise (a primary key never is); a column
without a type takes it from its annotation (`int` -> Integer, as for foreign keys here);
`__table_args__` holds constraints and indexes, then an optional dict of table options; a
column set on the class after it was made is added to its table.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from sqlalchemy import Column, Integer, MetaData, Table
from sqlalchemy.types import TypeEngine

T = TypeVar("T")

_FROM_ANNOTATION = {"int": Integer}


class Mapped(Generic[T]):
    """Only an annotation: says the column's Python type and whether it may be NULL."""


class _Spec:
    """What `mapped_column(...)` was given, made into a Column once its name is known."""

    __slots__ = ("args", "kw")

    def __init__(self, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        self.args, self.kw = args, kw

    def column(self, name: str, annotation: str | None) -> Column:
        args, kw = list(self.args), dict(self.kw)
        inner = None
        if annotation is not None:
            a = str(annotation).replace(" ", "")
            if not (a.startswith("Mapped[") and a.endswith("]")):
                raise TypeError(f"column {name!r}: annotation {annotation!r} is not Mapped[...]")
            inner = a[len("Mapped["):-1]
        if not any(_is_type(x) for x in args):
            base = (inner or "").split("|")[0]
            if base not in _FROM_ANNOTATION:
                raise TypeError(f"column {name!r} has no type and none can be taken from {annotation!r}")
            args.insert(0, _FROM_ANNOTATION[base])
        if "nullable" not in kw:
            optional = inner is not None and ("None" in inner.split("|") or inner.startswith("Optional["))
            kw["nullable"] = optional and not kw.get("primary_key", False)
        return Column(name, *args, **kw)


def _is_type(x: Any) -> bool:
    return isinstance(x, TypeEngine) or (isinstance(x, type) and issubclass(x, TypeEngine))


def mapped_column(*args: Any, **kw: Any) -> Any:
    return _Spec(args, kw)


class TableClass(type):
    """The metaclass of table classes: `class Base(metaclass=TableClass): metadata = MetaData()`."""

    def __init__(cls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **kw: Any) -> None:
        super().__init__(name, bases, ns, **kw)
        table_name = ns.get("__tablename__")
        if table_name is None:
            return
        annotations = ns.get("__annotations__", {})
        columns = []
        for attr, value in ns.items():
            if isinstance(value, _Spec):
                col = value.column(attr, annotations.get(attr))
                columns.append(col)
                type.__setattr__(cls, attr, col)
        extra = list(ns.get("__table_args__", ()))
        options = extra.pop() if extra and isinstance(extra[-1], dict) else {}
        type.__setattr__(cls, "__table__", Table(table_name, cls.metadata, *columns, *extra, **options))

    def __setattr__(cls, name: str, value: Any) -> None:
        if isinstance(value, _Spec) and "__table__" in cls.__dict__:
            col = value.column(name, None)
            cls.__table__.append_column(col)
            value = col
        super().__setattr__(name, value)

