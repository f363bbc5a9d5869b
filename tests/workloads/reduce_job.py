"""A reduce query on the generator (or rate) source in its own process, for the exactly-once tests.

Runs until the results ledger holds ``--stop-at`` batches (then stops the query cleanly),
or kills its own process group with SIGKILL right after the database committed batch
``--kill-after`` (before Spark writes that batch to its commit log), or runs until the test
kills it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from wl_helpers import generator_stream, rate_stream

from adabatch.spark import get_spark
from adabatch.workloads import WorkloadConfig, get_workload
from adabatch.workloads.sinks import Database


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--keys", type=int, default=40)
    ap.add_argument("--source", choices=("generator", "rate"), default="generator")
    ap.add_argument("--stop-at", type=int, default=None)
    ap.add_argument("--kill-after", type=int, default=None)
    args = ap.parse_args()

    spark = get_spark("local[2]", conf={"spark.ui.showConsoleProgress": "false"})
    cfg = WorkloadConfig(
        name="reduce",
        out_dir=Path(args.out),
        run_id=args.run_id,
        keys=args.keys,
        db_url=args.db,
        table_prefix=args.prefix,
    )
    workload = get_workload("reduce")
    workload.check(cfg)
    if args.source == "rate":
        df, trigger = rate_stream(spark, 300, args.keys), "1 second"
    else:
        df, trigger = generator_stream(spark, args.out, args.keys), "0 seconds"
    if args.kill_after is None:
        writer = workload.start(df, cfg)
    else:
        commit = workload.foreach_batch(cfg)

        def commit_then_die(batch_df, batch_id):
            commit(batch_df, batch_id)
            if batch_id == args.kill_after:
                print(f"committed batch {batch_id}, killing", flush=True)
                os.killpg(os.getpgid(0), signal.SIGKILL)

        writer = df.writeStream.foreachBatch(commit_then_die)
    query = (
        writer.option("checkpointLocation", str(Path(args.out) / "checkpoint"))
        .trigger(processingTime=trigger)
        .queryName("reduce")
        .start()
    )
    print("started", flush=True)
    with Database(cfg.database_url, cfg.table_prefix) as db:
        while query.isActive:
            query.awaitTermination(0.5)
            n = db.query("SELECT count(*) FROM {p}batches WHERE run_id = ?", (args.run_id,))
            if args.stop_at is not None and n[0][0] >= args.stop_at:
                query.stop()
                break
    if query.exception() is not None:
        print(query.exception(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
