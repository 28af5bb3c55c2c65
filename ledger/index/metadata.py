"""The schema's one MetaData (its constraint naming convention) and the Base every table
class of the index derives from: the models (ledger.index.models) and the report's tables
(ledger.index.report_tables) both declare on it, neither importing the other's module."""

from __future__ import annotations

from sqlalchemy import MetaData

from ledger.index.tabledefs import TableClass

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(metaclass=TableClass):
    metadata = MetaData(naming_convention=NAMING)
