"""ledger: an evidence ledger for AI coding-agent runs."""

__version__ = "0.1.0"
