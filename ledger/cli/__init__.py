"""The command line: a thin typer layer over the library (no SQL, no file formats here)."""
