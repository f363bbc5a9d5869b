"""Which kept slo runs a change to the controller would decide differently, and how.

Kept Spark runs outlive changes to the ``slo`` controller (a grid part takes a session).
This replays every kept slo run's reports through the controller of the working tree and
through that of ``--base`` (a git revision), open loop: each report is observed and the
plan asked at its cut. Per run it prints how many of the plans differ in mode or
interval, and the mean interval, margin ``m_q`` and ``δ`` under each, so a note can say which kept
runs tested an older controller and in which direction the change moves them.

    .venv/bin/python benchmarks/slo_replay.py runs/slo-full --base HEAD~1 [--only 'join-*']

Open loop means the batches are those the old controller chose: the replay shows where
the decisions part, not what the new controller would have measured after that.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def replay(run_dir: Path) -> list[list]:
    """``[cut_at, mode, interval, m_q, δ]`` after each report of one kept slo run."""
    from adabatch.control.base import BatchReport
    from adabatch.control.slo import SloController
    from adabatch.metrics import read_jsonl

    cfg = json.loads((run_dir / "config.json").read_text())
    ctrl = SloController(**cfg["params"])
    ctrl.plan(0.0)
    out = []
    for b in read_jsonl(run_dir / "metrics.jsonl"):
        if b.interval_s <= 0:
            continue
        ctrl.observe(
            BatchReport(
                b.batch_id, b.interval_s, b.blocks, b.records, b.processing_s,
                b.queue_delay_s, b.cut_at, b.started_at, b.finished_at,
                left_records=b.left_records,
            )
        )  # fmt: skip
        ctrl.plan(b.cut_at)
        st = ctrl.metrics_state()
        out.append([b.cut_at, st["mode"], st["interval"], st["margin"], st["latency_slack_s"]])
    return out


def runs(out_dir: Path, only: str) -> list[Path]:
    """The kept slo runs of a bench output directory whose name matches ``only``."""
    found = sorted(p.parent for p in (out_dir / "slo").glob("*-slo-*/metrics.jsonl"))
    return [p for p in found if fnmatch.fnmatch(p.name, only)]


def replay_at(rev: str | None, args: argparse.Namespace) -> dict[str, list]:
    """The replay of every run by the working tree (``rev`` None) or by revision ``rev``."""
    cmd = [sys.executable, __file__, str(args.out_dir), "--only", args.only, "--emit"]
    if rev is None:
        return json.loads(subprocess.check_output(cmd))
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "base"
        git = ["git", "-C", str(repo), "worktree"]
        subprocess.run([*git, "add", "-q", "--detach", str(tree), rev], check=True)
        try:
            env = {**os.environ, "PYTHONPATH": str(tree / "src")}
            return json.loads(subprocess.check_output(cmd, env=env))
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="a bench output directory (runs/slo-full)")
    parser.add_argument("--base", default="HEAD", help="the revision to compare with")
    parser.add_argument("--only", default="*", help="run names to replay (a glob)")
    parser.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the controller's console lines
    if args.emit:
        print(json.dumps({p.name: replay(p) for p in runs(args.out_dir, args.only)}))
        return
    if not runs(args.out_dir, args.only):
        sys.exit(f"no kept slo run matches {args.only!r} under {args.out_dir}/slo")
    old, new = replay_at(args.base, args), replay_at(None, args)
    print(f"means per run, {args.base} -> working tree")
    print(f"{'run':<28} {'changed':>9}  {'interval (s)':^14}  {'m_q':^12}  {'δ (s)':^12}")
    for name, a in old.items():
        b = new[name]
        changed = sum(1 for x, y in zip(a, b, strict=True) if x[1:3] != y[1:3])
        cells = []
        for col in (2, 3, 4):
            m = [statistics.mean(r[col] for r in s) for s in (a, b)]
            cells.append(f"{m[0]:5.2f} -> {m[1]:<5.2f}")
        print(f"{name:<28} {changed:>4}/{len(a):<4}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
