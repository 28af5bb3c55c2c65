"""Record classes as @dataclass makes them, written out (issue 15: a warm `ledger report`).

`dataclasses` imports `inspect` (~28 M instructions of a ~410 M warm report), and each
@dataclass compiles its methods when its module is imported (3-6 M instructions a class).
The records a warm read makes are written on `Plain` instead: `__slots__` lists the fields in
order, the class writes its own `__init__`; `==`, `repr` and hashing are a dataclass's (eq,
not frozen: unhashable; `FrozenPlain`: frozen, hashable). The `dataclasses` functions
(`fields`, `replace`, `asdict`, `is_dataclass`) still take them: `__dataclass_fields__` is
made the first time one of them asks, from a dataclass with the same fields (names only:
no types, no defaults), so only their callers import `dataclasses`.
"""

from __future__ import annotations

from typing import Any


class _DataclassFields:
    """`__dataclass_fields__` of a Plain class, made on first use and then kept on the class."""

    def __get__(self, obj: Any, cls: type) -> dict[str, Any]:
        import dataclasses

        twin = dataclasses.make_dataclass(cls.__name__, list(cls.__slots__))
        fields = twin.__dataclass_fields__  # type: ignore[attr-defined]
        setattr(cls, "__dataclass_fields__", fields)
        return fields


class Plain:
    __slots__: tuple[str, ...] = ()
    __dataclass_fields__ = _DataclassFields()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # (mutable: as a dataclass with eq and not frozen)

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"


class FrozenPlain(Plain):
    """A frozen record: its __init__ takes the fields in order and sets them with
    object.__setattr__."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[Any, ...]:  # (copy and pickle: made again by __init__, fields in order)
        return type(self), self._values()

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")
