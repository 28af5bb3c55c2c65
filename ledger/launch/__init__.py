"""Launching agents and commands under ledger (`ledger run`): process control, stream
adapters, redaction, bounded capture. Entry point: `ledger.launch.runner.launch(RunOptions)`.

Nothing here imports SQLAlchemy or genai-prices at import time (the launch path must stay
fast); pricing is imported only when an estimate is needed.
"""
