"""Launch the real ``claude`` / ``codex`` CLIs against a ``MockProvider``.

Everything runs in an isolated temp HOME (tests pass pytest's ``tmp_path``),
with a *minimal* environment built from scratch (so no variable of the
surrounding session - API keys, base URLs, CLAUDE_CODE_* - leaks in), and
with every setting that makes a client reach hosts other than the mock
turned off.  See tests/data/streams/README.md for what was verified.

Typical use::

    with MockProvider([tool_call("Bash", {"command": "echo hi"}),
                       answer("done")]) as mp:
        env = claude_env(tmp_path, mp)
        p = run_agent(claude_argv("run echo hi"), env, agent_cwd(tmp_path))
        events = parse_jsonl(p.stdout)

Layout under ``tmp_path``::

    home/            HOME (and home/.claude = CLAUDE_CONFIG_DIR,
                     home/.codex = CODEX_HOME with config.toml)
    work/            the working directory the agent runs in
    tmp/             TMPDIR
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any, Iterable, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
BIN_DIR = REPO_ROOT / "node_modules" / ".bin"
CLAUDE_BIN = BIN_DIR / "claude"
CODEX_BIN = BIN_DIR / "codex"
GEMINI_BIN = BIN_DIR / "gemini"

#: Versions the recorded streams and the documented facts are for.
CLAUDE_VERSION = "2.1.328"
CODEX_VERSION = "0.169.0"
GEMINI_VERSION = "0.61.0"

#: Default models: both are in Claude Code's / Codex's built-in model tables
#: (Codex emits a "Model metadata ... not found" error item for unknown
#: models such as gpt-5) and in genai-prices 0.2.3.
CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5.5"
#: In genai-prices' Google table; the client is told the model with -m.
GEMINI_MODEL = "gemini-2.5-flash"

#: Claude Code's list prices for CLAUDE_MODEL, USD per million tokens, as
#: measured from its total_cost_usd (input, output, cache read, cache write).
CLAUDE_SONNET_45_PRICES = {
    "input_tokens": 3.0,
    "output_tokens": 15.0,
    "cache_read_input_tokens": 0.30,
    "cache_creation_input_tokens": 3.75,
}

DUMMY_ANTHROPIC_KEY = "sk-ant-mock-0000"
DUMMY_OPENAI_KEY = "sk-mock-0000"
CODEX_KEY_VAR = "LEDGER_MOCK_OPENAI_KEY"
DUMMY_GEMINI_KEY = "mock-gemini-key-0000"

#: Stable stand-in for temp paths in saved streams.
STABLE_TMP = "/tmp/ledger-test"


# --------------------------------------------------------------------------
# availability
# --------------------------------------------------------------------------


def claude_available() -> bool:
    return CLAUDE_BIN.exists() and os.access(CLAUDE_BIN, os.X_OK)


def codex_available() -> bool:
    # codex is a node script (#!/usr/bin/env node) wrapping a native binary.
    return CODEX_BIN.exists() and os.access(CODEX_BIN, os.X_OK)


def gemini_available() -> bool:
    # gemini is a node script (bundle/gemini.js).
    return GEMINI_BIN.exists() and os.access(GEMINI_BIN, os.X_OK)


def agents_available() -> bool:
    """True when both real CLIs are installed in node_modules/.bin."""
    return claude_available() and codex_available()


# --------------------------------------------------------------------------
# directories and environment
# --------------------------------------------------------------------------


def _dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    tmp_path = Path(tmp_path)
    home, work, tmp = tmp_path / "home", tmp_path / "work", tmp_path / "tmp"
    for d in (home, work, tmp):
        d.mkdir(parents=True, exist_ok=True)
    return home, work, tmp


def agent_cwd(tmp_path: Path) -> Path:
    """The working directory to run an agent in (``tmp_path/work``)."""
    return _dirs(tmp_path)[1]


def base_env(tmp_path: Path) -> dict[str, str]:
    """Minimal environment: PATH (node is needed by codex), locale, HOME,
    TMPDIR; nothing inherited from the calling session."""
    home, _work, tmp = _dirs(tmp_path)
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "SHELL": "/bin/bash",
        "USER": os.environ.get("USER", "root"),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "NO_COLOR": "1",
    }


def _url(provider: Any) -> str:
    return provider if isinstance(provider, str) else provider.base_url


def claude_env(tmp_path: Path, provider: Any, *, max_retries: int = 2,
               extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for ``claude`` against ``provider`` (a MockProvider or a
    base URL such as ``http://127.0.0.1:PORT``)."""
    env = base_env(tmp_path)
    env.update({
        "CLAUDE_CONFIG_DIR": str(Path(env["HOME"]) / ".claude"),
        "ANTHROPIC_BASE_URL": _url(provider),
        "ANTHROPIC_API_KEY": DUMMY_ANTHROPIC_KEY,
        # The one that matters: without it Claude Code sends HEAD /api/hello
        # to the base URL and looks up api.anthropic.com.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_MAX_RETRIES": str(max_retries),
    })
    if extra:
        env.update(extra)
    return env


def claude_argv(prompt: str, *, model: str | None = CLAUDE_MODEL,
                max_turns: int | None = None, resume: str | None = None,
                allowed_tools: Sequence[str] | None = ("Bash",),
                extra_args: Iterable[str] = ()) -> list[str]:
    """``claude -p PROMPT --output-format stream-json --verbose ...``.

    The prompt comes right after ``-p`` (``--allowedTools`` is variadic and
    would swallow a prompt placed after it)."""
    argv = [str(CLAUDE_BIN), "-p", prompt, "--output-format", "stream-json",
            "--verbose"]
    if resume:
        argv += ["--resume", resume]
    if max_turns is not None:
        argv += ["--max-turns", str(max_turns)]
    if model:
        argv += ["--model", model]
    argv += list(extra_args)
    if allowed_tools:
        argv += ["--allowedTools", *allowed_tools]
    return argv


def codex_config_toml(base_url: str, *, retries: int = 0,
                      stream_idle_timeout_ms: int | None = None,
                      extra: str = "") -> str:
    """config.toml content for Codex 0.169 pointing at ``base_url``.

    Every key is accepted by ``codex exec --strict-config``."""
    idle = ("" if stream_idle_timeout_ms is None
            else f"stream_idle_timeout_ms = {int(stream_idle_timeout_ms)}\n")
    return f'''# written by tests/agentenv.py
model_provider = "mock"
check_for_update_on_startup = false
{extra}
[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
# With plugins on, codex looks up github.com, api.github.com and chatgpt.com.
plugins = false

[model_providers.mock]
name = "Mock provider"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "{CODEX_KEY_VAR}"
supports_websockets = false
request_max_retries = {int(retries)}
stream_max_retries = {int(retries)}
{idle}'''


def codex_env(tmp_path: Path, provider: Any, *, retries: int = 0,
              stream_idle_timeout_ms: int | None = None,
              extra_config: str = "",
              extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for ``codex``; writes ``$CODEX_HOME/config.toml``."""
    env = base_env(tmp_path)
    codex_home = Path(env["HOME"]) / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(codex_config_toml(
        _url(provider), retries=retries,
        stream_idle_timeout_ms=stream_idle_timeout_ms, extra=extra_config))
    env.update({
        "CODEX_HOME": str(codex_home),
        CODEX_KEY_VAR: DUMMY_OPENAI_KEY,
    })
    if extra:
        env.update(extra)
    return env


def codex_argv(prompt: str, *, model: str | None = CODEX_MODEL,
               resume: str | None = None, strict_config: bool = True,
               extra_args: Iterable[str] = ()) -> list[str]:
    """``codex exec [resume THREAD_ID] --json ... PROMPT``.

    For a resume the options go after ``resume`` (``codex exec resume
    [OPTIONS] [SESSION_ID] [PROMPT]``), with the thread id from the first
    run's ``thread.started`` event."""
    argv = [str(CODEX_BIN), "exec"]
    if resume:
        argv.append("resume")
    argv += ["--json", "--skip-git-repo-check",
             "--dangerously-bypass-approvals-and-sandbox"]
    if strict_config:
        argv.append("--strict-config")
    if model:
        argv += ["-m", model]
    argv += list(extra_args)
    if resume:
        argv.append(resume)
    argv.append(prompt)
    return argv


def gemini_settings(*, max_attempts: int = 1, extra: dict | None = None) -> dict:
    """``$HOME/.gemini/settings.json`` for Gemini CLI 0.61 against a mock.

    API-key auth (else it asks for a login), and every switch that makes it
    reach other hosts off: usage statistics (Clearcut), telemetry, update
    checks. ``max_attempts`` bounds its retries of a failed model call."""
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False,
                    "enableAutoUpdateNotification": False,
                    "maxAttempts": int(max_attempts)},
    }
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(settings.get(key), dict):
            settings[key] = {**settings[key], **value}
        else:
            settings[key] = value
    return settings


def gemini_env(tmp_path: Path, provider: Any, *, max_attempts: int = 1,
               settings: dict | None = None,
               extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for ``gemini``; writes ``$HOME/.gemini/settings.json``.

    Its session logs go to ``$HOME/.gemini/tmp/<project>/chats/``."""
    env = base_env(tmp_path)
    gemini_dir = Path(env["HOME"]) / ".gemini"
    gemini_dir.mkdir(parents=True, exist_ok=True)
    (gemini_dir / "settings.json").write_text(json.dumps(
        gemini_settings(max_attempts=max_attempts, extra=settings), indent=2))
    env.update({
        "GEMINI_API_KEY": DUMMY_GEMINI_KEY,
        # else exit 55: "not running in a trusted directory"
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "GOOGLE_GEMINI_BASE_URL": _url(provider),
    })
    if extra:
        env.update(extra)
    return env


def gemini_argv(prompt: str, *, model: str | None = GEMINI_MODEL,
                resume: str | None = None,
                extra_args: Iterable[str] = ()) -> list[str]:
    """``gemini -p PROMPT --output-format stream-json -m MODEL --yolo``
    (--yolo: tools run without asking, as nobody can answer headless)."""
    argv = [str(GEMINI_BIN), "-p", prompt, "--output-format", "stream-json"]
    if model:
        argv += ["-m", model]
    if resume:
        argv += ["--resume", resume]
    argv += ["--yolo", *extra_args]
    return argv


# --------------------------------------------------------------------------
# running and reading
# --------------------------------------------------------------------------


def run_agent(argv: Sequence[str], env: dict[str, str], cwd: Path, *,
              timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a client to completion with stdin closed (/dev/null).

    The client runs in its own process group; on timeout the whole group is
    killed (``codex`` is a node wrapper around a native child that would
    otherwise be orphaned) and ``subprocess.TimeoutExpired`` is raised."""
    proc = start_agent(argv, env, cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_agent(proc, grace=2)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(list(argv), timeout, out, err)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def start_agent(argv: Sequence[str], env: dict[str, str], cwd: Path
                ) -> subprocess.Popen:
    """Start a client in its own process group (kill with ``kill_agent``)."""
    return subprocess.Popen(list(argv), env=env, cwd=str(cwd),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def kill_agent(proc: subprocess.Popen, grace: float = 5.0) -> int:
    """SIGTERM the client's process group, SIGKILL after ``grace`` s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return proc.wait(timeout=grace)


def parse_jsonl(text: str) -> list[dict]:
    """Parse a client's JSONL stdout (non-JSON lines are skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _slug(path: str) -> str:
    # Claude Code's project-directory form of a path.
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def scrub(text: str, tmp_path: Path) -> str:
    """Replace ``tmp_path`` (plain and in Claude's slug form) by
    ``/tmp/ledger-test`` so saved streams are stable."""
    real = str(Path(tmp_path))
    for variant in {real, os.path.realpath(real)}:
        text = text.replace(variant, STABLE_TMP)
        text = text.replace(_slug(variant), _slug(STABLE_TMP))
    return text


def claude_cost(usage: dict, prices: dict | None = None) -> float:
    """Cost in USD of Anthropic-style usage at per-million ``prices``."""
    prices = prices or CLAUDE_SONNET_45_PRICES
    return sum(usage.get(k, 0) * p for k, p in prices.items()) / 1e6
