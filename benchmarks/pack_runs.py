"""Pack the finished runs of a bench output directory into its tarball in
``benchmarks/unfinished/``, merged with the runs the tarball already holds.

A bench longer than a session is kept between sessions this way (see
``benchmarks/unfinished/README.md``). Per finished run it keeps what ``--resume`` and
the analysis read: ``config.json``, ``summary.json``, ``metrics.jsonl``, the marker, the
sink check's answer (``sink.json``) where a run made one, a processingTime trigger run's
Spark progress log (its batches' durations), and the sink database of the runs named by
``--sink`` (to check the answer again), and each experiment's ``notes.md`` (published
with its section). A run that is unfinished (no summary, ``INCOMPLETE`` present, or
interrupted) is left out.

    .venv/bin/python benchmarks/pack_runs.py runs/slo-full --sink '*-overload-*'
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import os
import sqlite3
import sys
import tarfile
import tempfile
from pathlib import Path

from adabatch.bench.experiments.sink_check import SINK_FILE
from adabatch.bench.resume import MARKER, finished_summary
from adabatch.bench.runner import NOTES_FILE
from adabatch.outputs import INCOMPLETE
from adabatch.outputs import MARKER as RUN_MARKER
from adabatch.runs.spark_job import PROGRESS_FILE

KEPT = ("config.json", "summary.json", "metrics.jsonl", RUN_MARKER, SINK_FILE)
SINK = "results.sqlite"


def finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run that wrote all its files and was not interrupted:
    what ``--resume`` would reuse for the config the run recorded."""
    config = run_dir / "config.json"
    if not config.is_file() or (run_dir / INCOMPLETE).exists():
        return False
    recorded = json.loads(config.read_text(encoding="utf-8"))
    return finished_summary(run_dir, recorded) is not None


def run_files(run_dir: Path, sink_globs: list[str]) -> list[Path]:
    """The files of one finished run that the tarball keeps."""
    files = [run_dir / name for name in KEPT if (run_dir / name).is_file()]
    config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("role") == "trigger":
        progress = run_dir / PROGRESS_FILE
        if not progress.is_file():
            sys.exit(f"{run_dir}: a trigger run without {PROGRESS_FILE}; --resume needs it")
        files.append(progress)
    if any(fnmatch.fnmatch(run_dir.name, g) for g in sink_globs):
        sink = run_dir / SINK
        if not sink.is_file():
            sys.exit(f"{run_dir}: --sink names it, but it has no {SINK}")
        with sqlite3.connect(sink) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        files.append(sink)
    return files


def collect(out_dir: Path, sink_globs: list[str]) -> dict[str, Path]:
    """Archive name -> file, for every finished run under the bench directory ``out_dir``
    (``NAME/EXPERIMENT/RUN/FILE``, plus each experiment's ``bench.json`` and
    ``notes.md``)."""
    members: dict[str, Path] = {}
    unfinished: list[str] = []
    for marker in sorted(out_dir.glob(f"*/{MARKER}")):
        exp_dir = marker.parent
        members[f"{out_dir.name}/{exp_dir.name}/{MARKER}"] = marker
        if (exp_dir / NOTES_FILE).is_file():
            members[f"{out_dir.name}/{exp_dir.name}/{NOTES_FILE}"] = exp_dir / NOTES_FILE
        for run_dir in sorted(p for p in exp_dir.iterdir() if p.is_dir()):
            if not finished(run_dir):
                unfinished.append(run_dir.name)
                continue
            for f in run_files(run_dir, sink_globs):
                members[f"{out_dir.name}/{exp_dir.name}/{run_dir.name}/{f.name}"] = f
    if unfinished:
        more = f" and {len(unfinished) - 5} more" if len(unfinished) > 5 else ""
        print(f"left out, unfinished: {', '.join(unfinished[:5])}{more}")
    return members


def pack(out_dir: Path, tarball: Path, sink_globs: list[str]) -> None:
    """Write ``tarball``: its earlier members, replaced by the runs now in ``out_dir``."""
    members = collect(out_dir, sink_globs)
    runs_now = {name.rsplit("/", 1)[0] for name in members if name.count("/") == 3}
    kept_before = 0
    fd, tmp = tempfile.mkstemp(dir=tarball.parent, suffix=".tmp")
    os.close(fd)
    try:
        with tarfile.open(tmp, "w:gz") as out:
            if tarball.is_file():
                with tarfile.open(tarball, "r:gz") as old:
                    for info in old.getmembers():
                        run = info.name.rsplit("/", 1)[0]
                        if info.name in members or run in runs_now or not info.isfile():
                            continue
                        data = old.extractfile(info)
                        assert data is not None
                        out.addfile(info, io.BytesIO(data.read()))
                        kept_before += 1
            for name, path in sorted(members.items()):
                out.add(path, arcname=name)
        os.replace(tmp, tarball)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(
        f"{tarball}: {len(runs_now)} runs from {out_dir}, {kept_before} files kept "
        f"from before; {tarball.stat().st_size / 1e6:.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="the bench --out directory, e.g. runs/slo-full")
    parser.add_argument(
        "--tarball",
        type=Path,
        help="default: benchmarks/unfinished/<name of out_dir>.tar.gz",
    )
    parser.add_argument(
        "--sink",
        action="append",
        default=[],
        metavar="GLOB",
        help="keep the sink database of the runs whose name matches (repeatable)",
    )
    args = parser.parse_args()
    if not args.out_dir.is_dir():
        sys.exit(f"{args.out_dir}: not a directory; expected a bench --out directory")
    tarball = args.tarball or Path(__file__).parent / "unfinished" / f"{args.out_dir.name}.tar.gz"
    pack(args.out_dir, tarball, args.sink)


if __name__ == "__main__":
    main()
