"""A run's project, and what `--project GLOB` matches (issue 29): one rule for `report
project`, every report's `--project`, and `ledger runs --project`.

A run's project is its git worktree's top level where the record names one (`ledger run`
writes it), else its working directory (`cwd`: an imported Claude / Codex / Gemini session's
is the directory the client ran in). `project_sql` is the same rule for the index's `runs`
table.

A pattern matches a project when it matches (fnmatch, case-sensitive: paths are) the whole
path or its last component: `--project myrepo` finds `/home/me/src/myrepo`, `--project
'/home/me/src/*'` everything under src (`*` crosses `/`), `--project 'api-*'` every project
whose directory starts so. A run without a project matches no pattern.
"""

from __future__ import annotations

from typing import Iterable, Sequence


def project_of(worktree: str | None, cwd: str | None) -> str | None:
    return worktree if worktree is not None else cwd


def project_sql(runs: str) -> str:
    """project_of over the `runs` table (or its alias `runs`) in SQL."""
    return f"COALESCE({runs}.worktree, {runs}.cwd)"


def last_component(project: str) -> str:
    """The directory's own name (`/a/b/myrepo/` -> `myrepo`; a Windows path's too)."""
    trimmed = project.rstrip("/\\")
    return trimmed.replace("\\", "/").rsplit("/", 1)[-1] if trimmed else project


def project_matches(project: str | None, patterns: Sequence[str]) -> bool:
    if project is None:
        return False
    from fnmatch import fnmatchcase  # (here: ledger.records.model reads project_of on every path)

    name = last_component(project)
    return any(fnmatchcase(project, p) or fnmatchcase(name, p) for p in patterns)


def matching(projects: Iterable[str | None], patterns: Sequence[str]) -> list[str]:
    """The projects (each once, sorted) that the patterns match."""
    return sorted({p for p in projects if p is not None and project_matches(p, patterns)})


def no_project_hint(project: list[str]) -> str:
    """What an empty report filtered by --project says on stderr (every report kind)."""
    said = " ".join(f"--project {p!r}" for p in project)
    return f"Hint: no runs matched {said}; `ledger report project` lists the projects"
