"""The clients whose session logs are archived and where each keeps them (its config dirs,
the subdirectories and names of its logs)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from ledger.sources.archiveformat import ZSTD_SUFFIX
from ledger.sources.archivesummary import Record


class Client(Record):
    __slots__ = ("name", "label", "subdirs", "env_var", "defaults", "prefix", "key_by_name", "env_subdir", "log_dir",
                 "zstd", "name_prefix")

    def __init__(self, name: str, label: str, subdirs: tuple[str, ...], env_var: str, defaults: tuple[str, ...],
                 prefix: str = "", key_by_name: bool = False, env_subdir: str = "", log_dir: str = "",
                 zstd: bool = False, name_prefix: str = "") -> None:
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "label", label)
        set_(self, "subdirs", subdirs)  # below the config dir, in priority order (first wins a key)
        set_(self, "env_var", env_var)
        set_(self, "defaults", defaults)  # config dirs tried when env_var is unset ("~" expanded)
        set_(self, "prefix", prefix)  # a log's file name starts with it
        # the file name alone identifies a log when it is the client's own name for it (Codex:
        # `rollout-<time>-<uuid>.jsonl`, moved from sessions/ to archived_sessions/); any other
        # name: its path below the config dir
        set_(self, "key_by_name", key_by_name)
        set_(self, "env_subdir", env_subdir)  # the config dir below env_var's dir ($GEMINI_CLI_HOME/.gemini)
        set_(self, "log_dir", log_dir)  # a log lies in (or below) a directory of this name (Gemini: chats/)
        set_(self, "zstd", zstd)  # a log may be a whole zstd file `<name>.jsonl.zst` (Codex compresses cold rollouts)
        set_(self, "name_prefix", name_prefix)  # the client's own log names start with it (key_by_name)

    def __setattr__(self, name: str, value: Any) -> None:  # (frozen: CLIENTS are constants)
        raise AttributeError(f"cannot assign to field {name!r}")

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, k) for k in self.__slots__))

    def wanted(self, name: str, rel: str | None = None) -> bool:
        if self.log_dir and rel is not None and f"/{self.log_dir}/" not in f"/{rel}":
            return False
        if self.zstd and name.endswith(ZSTD_SUFFIX):
            name = name[:-len(ZSTD_SUFFIX)]
        return name.endswith(".jsonl") and name.startswith(self.prefix)

    def key(self, rel: str) -> str:
        if self.zstd and rel.endswith(ZSTD_SUFFIX):
            rel = rel[:-len(ZSTD_SUFFIX)]  # (its lines are the plain log's: one log, one archive)
        name = rel.rsplit("/", 1)[-1]
        return name if self.key_by_name and name.startswith(self.name_prefix) else rel


CLIENTS: dict[str, Client] = {
    "claude": Client("claude", "Claude Code", ("projects",), "CLAUDE_CONFIG_DIR", ("~/.claude", "~/.config/claude")),
    # every *.jsonl below sessions/ and archived_sessions/, as ccusage reads them (the client
    # names its rollouts `rollout-<time>-<uuid>.jsonl`; a copy renamed, or a peer's fixture,
    # `sessions/<project>/<name>.jsonl`, is a rollout all the same)
    "codex": Client("codex", "Codex", ("sessions", "archived_sessions"), "CODEX_HOME", ("~/.codex",),
                    key_by_name=True, zstd=True, name_prefix="rollout-"),
    # tmp/<project>/chats/session-*.jsonl, subagents in chats/<session>/<id>.jsonl
    "gemini": Client("gemini", "Gemini CLI", ("tmp",), "GEMINI_CLI_HOME", ("~/.gemini",), env_subdir=".gemini",
                     log_dir="chats"),
}


def default_roots(client: Client, env: Mapping[str, str] | None = None) -> list[Path]:
    """The config dirs to look in: $CLAUDE_CONFIG_DIR / $CODEX_HOME / $GEMINI_CLI_HOME/.gemini,
    else the defaults."""
    env = os.environ if env is None else env
    if env.get(client.env_var):
        return [Path(env[client.env_var]).expanduser() / client.env_subdir]
    home = env.get("HOME") or os.path.expanduser("~")
    return [Path(home) / d[2:] if d.startswith("~/") else Path(d) for d in client.defaults]


def has_logs_dir(client: Client, root: Path) -> bool:
    return any(os.path.isdir(root / sub) for sub in client.subdirs)


def clients_with_logs(env: Mapping[str, str] | None = None) -> list[str]:
    """The clients (their labels) whose logs `ledger import` would find on this machine."""
    return [c.label for c in CLIENTS.values() if any(has_logs_dir(c, root) for root in default_roots(c, env))]


def missing_home_hint() -> str:
    """The hint for a missing home: names `ledger import` when agent logs are here."""
    from ledger.home import missing_home_hint as hint

    return hint(clients_with_logs())
