"""What carrying the controller's state in the offsets costs each batch.

The source's driver side (``StreamRuntime``) runs on a simulated clock against Spark's call
sequence, with processing times from the simulator's ``reduce`` cost model, for an hour of
stream time (``--duration``) per controller and rate profile. For every batch handed out it
measures what Spark writes to its offset log (the end offset's JSON, the carried state
included) and the time to build the carried state (``StreamRuntime._carried``); at the end,
the time to restore from it on a fresh driver. It also times the JSON round trip of an
offset, which PySpark's worker does at every ``latestOffset`` call, idle polls included.

    .venv/bin/python benchmarks/offset_state.py [--duration 1h] [--json runs/offset_state.json]

A Spark offset-log file (``checkpoint/offsets/N``) holds this offset JSON plus a header of
Spark's own (version line and batch metadata with the session's SQL conf). ``--spark 90``
runs a groupBy count into the memory sink on real Spark (local[2]) for 90 s per controller
instead and reports the sizes of those files.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from adabatch.profiles import parse_duration
from adabatch.sim.workloads import make_workload
from adabatch.streaming.offsets import INITIAL, SourceOffset
from adabatch.streaming.options import parse_options
from adabatch.streaming.runtime import StreamRuntime

CONTROLLERS = ("fixed-point", "isotonic")
PROFILES = (
    "constant:3000",
    "sine:1000:8000:60s",
    "markov:500,2000,8000,32000:20s:3",
)
MARKS_S = (60.0, 900.0, 3600.0, 14_400.0)  # stream times at which sizes are reported


class Clock:
    """Unix time the benchmark advances."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def run(controller: str, profile: str, duration_s: float, seed: int = 1) -> dict[str, Any]:
    """One case: sizes by stream time, encode and restore times."""
    clock = Clock()
    options = parse_options({"controller": controller, "profile": profile, "seed": str(seed)})
    rt = StreamRuntime(options, clock=clock)
    model = make_workload("reduce")
    rng = np.random.default_rng(seed)
    start = INITIAL.to_dict()
    rt.latest_offset(start)
    rt.latest_offset(start)
    sizes: list[tuple[float, int]] = []
    encode_s: list[float] = []
    while rt.now() < duration_s:
        end = rt.latest_offset(start)
        if end == start:  # nothing due: Spark polls again at the next cut
            clock.t += max(rt.cutter.next_cut_at() - rt.now(), 0.0) + 1e-4  # type: ignore[union-attr]
            continue
        sizes.append((rt.now(), len(json.dumps(end))))
        encode_s.append(_timed(lambda: rt._carried(rt.now()))[1])
        rt.partitions(start, end)
        batch = rt.cutter.in_flight  # type: ignore[union-attr]
        records = SourceOffset.from_dict(end).offset - SourceOffset.from_dict(start).offset
        clock.t += model.cost(
            records, batch.interval_s, batch.blocks, rt.now(), rng, None
        ).processing_s
        start = end
    text = json.dumps(start)
    _, restore_s = _timed(lambda: StreamRuntime(options, clock=clock).latest_offset(start))
    _, poll_json_s = _timed(lambda: [json.dumps(json.loads(text)) for _ in range(100)])
    return {
        "controller": controller,
        "profile": profile,
        "batches": len(sizes),
        "bytes_at": {
            f"{m / 60:g}m": max((n for t, n in sizes if t <= m), default=None)
            for m in MARKS_S
            if m <= duration_s
        },
        "bytes_max": max(n for _, n in sizes),
        "encode_ms_median": 1e3 * statistics.median(encode_s),
        "encode_ms_p95": 1e3 * float(np.percentile(encode_s, 95)),
        "restore_ms": 1e3 * restore_s,
        "poll_json_ms": 1e3 * poll_json_s / 100,
    }


SPARK_CASES = (
    ("fixed-point", "constant:2000"),
    ("isotonic", "sine:1000:6000:60s"),
    ("spark-default", "constant:2000"),
)


def spark_logs(seconds: float, out: Path) -> None:
    """Real Spark: the offset-log files of a query run ``seconds`` per controller."""
    import shutil

    from adabatch.api import read_stream
    from adabatch.spark import get_spark

    spark = get_spark("local[2]")
    print(f"{'controller':<14} {'files':>7} {'file bytes':>10} {'offset':>7} {'state':>6}")
    for controller, profile in SPARK_CASES:
        ck = out / controller / "ck"
        shutil.rmtree(ck.parent, ignore_errors=True)
        df = read_stream(spark, controller=controller, profile=profile, keys=1000)
        name = "offset_state_" + controller.replace("-", "_")
        writer = df.groupBy("key").count().writeStream.outputMode("complete").format("memory")
        query = writer.queryName(name).option("checkpointLocation", str(ck)).start()
        time.sleep(seconds)
        query.stop()
        logs = sorted(
            (p for p in (ck / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
        )
        offset = logs[-1].read_text(encoding="utf-8").splitlines()[-1]
        state = json.loads(offset).get("state", "")
        size = logs[-1].stat().st_size
        print(f"{controller:<14} {len(logs):>7} {size:>10} {len(offset):>7} {len(state):>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="1h", help="stream time per case (1h, 4h)")
    parser.add_argument("--controllers", default=",".join(CONTROLLERS))
    parser.add_argument("--profiles", default=";".join(PROFILES), help="';'-separated")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--spark", type=float, help="seconds per controller on real Spark")
    parser.add_argument("--out", type=Path, default=Path("runs/offset_state"))
    args = parser.parse_args()
    if args.spark is not None:
        spark_logs(args.spark, args.out)
        return
    duration_s = parse_duration(args.duration)
    rows = []
    print(
        f"{'controller':<12} {'profile':<34} {'batches':>7} {'offset bytes by stream time':<34}"
        f" {'max':>6} {'enc ms':>7} {'p95':>6} {'restore ms':>10} {'poll ms':>7}"
    )
    for controller in args.controllers.split(","):
        for profile in args.profiles.split(";"):
            row = run(controller, profile, duration_s)
            rows.append(row)
            marks = " ".join(f"{k}:{v}" for k, v in row["bytes_at"].items())
            print(
                f"{controller:<12} {profile:<34} {row['batches']:>7} {marks:<34}"
                f" {row['bytes_max']:>6} {row['encode_ms_median']:>7.3f}"
                f" {row['encode_ms_p95']:>6.2f} {row['restore_ms']:>10.1f}"
                f" {row['poll_json_ms']:>7.3f}",
                flush=True,
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
