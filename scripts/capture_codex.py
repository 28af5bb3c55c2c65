#!/usr/bin/env python3
"""Capture what the real Codex CLI writes, with the truth, into tests/data/captures/codex/.

Drives node_modules/.bin/codex (0.169.0) headless (`codex exec --json`, `exec resume`,
`exec fork ID`, `archive`) and its TUI in tmux (`/model`, `/fork`, `codex fork ID`) against
tests/mockprovider.py on 127.0.0.1, in an isolated HOME/CODEX_HOME (tests/agentenv.py). Every
response the mock serves is logged (response id, model, usage, tier, time, thread): that is
truth.json. The rollouts are kept with temp paths replaced and long strings cut
(tests/codexcapture.py). Nothing but 127.0.0.1 is contacted.

    python3 scripts/capture_codex.py                 # codex 0.169 -> captures/codex/v0169
    python3 scripts/capture_codex.py --v0130 BIN     # a 0.130 binary -> captures/codex/v0130

A 0.130 binary for the second form: `npm install --prefix /tmp/codex130 @openai/codex@0.130.0`
(outside the repository; only its capture is committed).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from codexcapture import Capture, keep, kill_tmux_server, mock_scenario, reset, write_truth  # noqa: E402
from mockprovider import MockProvider, answer, tool_call  # noqa: E402

OUT = ROOT / "tests" / "data" / "captures" / "codex"
EXEC = ("--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox")
TUI = ("--no-daemon", "--dangerously-bypass-approvals-and-sandbox")
MODEL, OTHER = "gpt-5.5", "gpt-5.6-luna"


def thread_of(events: list[dict]) -> str:
    return next(e["thread_id"] for e in events if e.get("type") == "thread.started")


def headless(cap: Capture) -> dict[str, str]:
    t: dict[str, str] = {}
    cap.script([tool_call("exec_command", {"cmd": "echo hi"}), answer("done: hi")])
    t["exec"] = thread_of(cap.exec(*EXEC, "-m", MODEL, "run echo hi"))
    cap.mark("exec-tools", thread=t["exec"], how="codex exec --json -m gpt-5.5 (a tool call, then an answer)")

    cap.script([tool_call("exec_command", {"cmd": "echo again"}), answer("done again")])
    cap.exec("resume", *EXEC, "-m", MODEL, t["exec"], "run echo again")
    cap.mark("exec-resume", thread=t["exec"], how="codex exec resume -m gpt-5.5 ID (same model: totals go on)")

    cap.script([answer("summary of the thread so far"), answer("now on luna")])
    cap.exec("resume", *EXEC, "-m", OTHER, t["exec"], "go on with luna")
    cap.mark("exec-resume-model", thread=t["exec"],
             how="codex exec resume -m gpt-5.6-luna ID: the model changes (re-emit, compaction on gpt-5.5)")

    cap.script([answer("summary for the fork"), answer("forked answer")])
    t["exec-fork"] = thread_of(cap.exec("fork", *EXEC, "-m", MODEL, t["exec"], "a forked question"))
    cap.mark("exec-fork", thread=t["exec-fork"], parent=t["exec"],
             how="codex exec fork -m gpt-5.5 ID PROMPT (a fork on another model than its parent's last)")

    cap.script([answer("fork resumed")])
    cap.exec("resume", *EXEC, "-m", MODEL, t["exec-fork"], "the fork again")
    cap.mark("exec-fork-resume", thread=t["exec-fork"], how="codex exec resume -m gpt-5.5 FORK")

    cap.script([answer("quick")])
    t["priority"] = thread_of(cap.exec(*EXEC, "-m", MODEL, "-c", 'service_tier="priority"', "be quick"))
    cap.mark("exec-priority", thread=t["priority"], how='codex exec -c service_tier="priority"')
    return t


def tui_ready(ui) -> None:
    """Past the model-availability notice (keep the model asked for), at the prompt."""
    try:
        ui.wait(r"Use existing model", 20)
        time.sleep(1)
        ui.key("2")
        ui.wait(r"Use existing model", 10, absent=True)
    except TimeoutError:
        pass
    ui.wait(r"Ask Codex|›", 30)
    time.sleep(1)


def tui_turn(ui, prompt: str, expect: str) -> None:
    ui.submit(prompt)
    ui.wait(re.escape(expect), 120)
    ui.wait(r"esc to interrupt", 60, absent=True)
    time.sleep(2)  # (the thread-title call and the rollout's last lines)


def tui_exit(ui) -> None:
    ui.submit("/quit")
    ui.wait(r"CLIENT-EXIT", 30)


def tui(cap: Capture, t: dict[str, str]) -> None:
    before = {p.name for p in cap.rollouts()}
    ui = cap.tui("tui", *TUI, "-m", MODEL)
    try:
        tui_ready(ui)
        cap.script([tool_call("exec_command", {"cmd": "echo tui"}), answer("tui answer one")])
        tui_turn(ui, "run echo tui", "tui answer one")
        cap.mark("tui-turn", how="codex (TUI) -m gpt-5.5: a prompt with a tool call")

        cap.script([answer("summary before luna"), answer("luna answer")])
        ui.submit("/model")
        ui.wait(r"Select Model", 30)
        ui.wait(r"GPT-5\.6-Luna", 10)
        ui.key(re.search(r"(\d+)\. GPT-5\.6-Luna", ui.screen()).group(1))
        ui.wait(r"Select Reasoning", 15)
        time.sleep(1)
        ui.key("Enter")  # the effort picker: its default
        ui.wait(r"Model changed to gpt-5\.6-luna", 20)
        ui.wait(r"Select Reasoning", 10, absent=True)
        time.sleep(2)
        tui_turn(ui, "now on luna", "luna answer")
        cap.mark("tui-model", how=f"/model -> {OTHER} (the picker), then a prompt")

        cap.script([answer("fork answer")])
        ui.submit("/fork")
        time.sleep(4)
        tui_turn(ui, "in the fork", "fork answer")
        cap.mark("tui-fork", how="/fork in the TUI, then a prompt")
        tui_exit(ui)
    finally:
        ui.close()
    new = sorted(p for p in cap.rollouts() if p.name not in before)
    t["tui"] = min(new, key=lambda p: p.name).stem[-36:]
    cap.notes["tui-turn"]["files"] = [p.name for p in new]

    ui = cap.tui("fork", "fork", *TUI, t["tui"])
    try:
        tui_ready(ui)
        cap.script([answer("cli fork answer")])
        tui_turn(ui, "forked from the command line", "cli fork answer")
        cap.mark("codex-fork", parent=t["tui"], how="codex fork ID (TUI), then a prompt")
        tui_exit(ui)
    finally:
        ui.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--v0130", metavar="BIN", help="capture the 0.130 fork shape with this codex binary")
    ap.add_argument("--no-tui", action="store_true", help="headless scenarios only")
    ap.add_argument("--keep-temp", action="store_true")
    ap.add_argument("--out", metavar="DIR", help="write the capture here instead (a held-out capture)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="codex-capture-") as tmp, MockProvider(mock_scenario()) as mp:
        root = Path(tmp)
        try:
            if args.v0130:
                cap = Capture(root, mp, codex_bin=Path(args.v0130))
                dest = Path(args.out) if args.out else OUT / "v0130"
                threads = v0130(cap)
                client = "codex 0.130.0"
            else:
                cap = Capture(root, mp)
                dest = Path(args.out) if args.out else OUT / "v0169"
                threads = headless(cap)
                if not args.no_tui:
                    tui(cap, threads)
                cap.run("archive", threads["exec-fork"])
                cap.mark("archive", thread=threads["exec-fork"],
                         how="codex archive ID: the fork's rollout moves to archived_sessions/ (flat)")
                client = "codex 0.169.0"
            reset(dest)
            files = keep(cap, dest)
            write_truth(cap, dest, client=client, files=files)
            print(f"{dest}: {len(files)} rollouts, {len(cap.truth)} responses")
            for name, n in cap.notes.items():
                print(f"  {name}: {n}")
        finally:
            kill_tmux_server()
            if args.keep_temp:
                import shutil
                shutil.copytree(root, "/tmp/codex-capture-kept", dirs_exist_ok=True)
    return 0


def v0130(cap: Capture) -> dict[str, str]:
    t: dict[str, str] = {}
    cap.script([tool_call("exec_command", {"cmd": "echo hi"}), answer("done: hi")])
    t["exec"] = thread_of(cap.exec(*EXEC, "-m", MODEL, "run echo hi"))
    cap.mark("exec-tools", thread=t["exec"], how="codex 0.130 exec --json -m gpt-5.5")
    cap.script([answer("resumed 130")])
    cap.exec("resume", *EXEC, "-m", MODEL, t["exec"], "again")
    cap.mark("exec-resume", thread=t["exec"], how="codex 0.130 exec resume -m gpt-5.5 ID")
    before = {p.name for p in cap.rollouts()}
    ui = cap.tui("fork130", "fork", "-m", MODEL, "--dangerously-bypass-approvals-and-sandbox", t["exec"])
    try:
        tui_ready(ui)
        cap.script([answer("fork answer 130")])
        tui_turn(ui, "a forked question", "fork answer 130")
        tui_exit(ui)
    finally:
        ui.close()
    new = [p for p in cap.rollouts() if p.name not in before]
    cap.mark("fork", parent=t["exec"], files=[p.name for p in new], how="codex 0.130 fork -m gpt-5.5 ID (TUI), then a prompt")
    return t


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
