"""``adabatch deadline bench``: the deadline paper's experiments, written to a report.

Sections (paper figure in brackets), all on the same TPC-H landing data:

1. **profiles** [Fig. 3, 4]: every query processed in batches of decreasing size on Spark
   (:func:`~adabatch.deadline.spark.cost_profile.profile_query`): measured cost versus number of
   batches, and the fitted batch-cost and final-aggregation models. ``D`` is the measured
   cost of the whole window in one batch.
2. **single** [Fig. 6]: each query alone with deadlines ``window end + f·D`` for
   ``f = 1, 0.8, ..., 0.1`` on the Spark runner in real time: Function 1 plans with the
   fitted models times a safety margin; reported: deadline met, Spark batches, measured
   cost / D, answer equal to DuckDB's.
3. **baseline** [Fig. 5]: each query as a Structured Streaming query over the same
   landing files (default trigger, a fixed trigger, AvailableNow): cost / D, and the
   scheduler's measured cost at deadline 1D for comparison.
4. **multi (simulated)** [Fig. 7, 8, 10, 11]: all queries at once with the fitted models
   in the simulated mode: strategies × deadlines δ with MinBatchSize (δ_RSF = 0.5), EDF
   and LLF without it, and variable input rates (δ = 0.1 with δ_RSF = 1; δ = 0.2 with
   δ_RSF = 0.5).
5. **multi (Spark)**: a few queries under the multi-query loop on the Spark runner.

Raw per-batch metrics go to ``OUT/batches.jsonl`` (Spark jobs) and
``OUT/streaming_progress.jsonl`` (micro-batches); results to ``OUT/results.json``; PNG
figures and ``OUT/deadline.md``; ``--docs PATH`` copies the report and its figures there.

The full bench takes hours on two cores. ``--resume`` continues an interrupted one (or
extends a finished one with more queries, factors or triggers) in the same OUT: profiles,
single-query runs and streaming runs already in ``OUT/results.json`` are kept, the rest
run, and the simulated section is recomputed. The data settings (scale factor, slots,
rate), the margin and the profile sizes must match, or the kept rows would not compare.

The modules: :mod:`.config` (what a run depends on), :mod:`.rows` (``results.json``'s rows
as dataclasses), :mod:`.simulation` (the simulated section), :mod:`.run` (the Spark
sections, ``--resume``, ``--report-only``), :mod:`.figures` and :mod:`.report`
(``deadline.md``).
"""

from __future__ import annotations

from adabatch.bench.experiments.deadline.config import (
    PAPER_FACTORS,
    SECTIONS,
    BenchConfig,
    bench_config,
)
from adabatch.bench.experiments.deadline.report import publish, write_report
from adabatch.bench.experiments.deadline.run import (
    previous_results,
    rerender,
    run_bench_config,
)
from adabatch.bench.experiments.deadline.simulation import (
    RATE_PROFILES,
    fitted_specs,
    paper_lateness,
    sim_c_max,
    simulate_grid,
    stretched_trace,
)

__all__ = [
    "PAPER_FACTORS",
    "RATE_PROFILES",
    "SECTIONS",
    "BenchConfig",
    "bench_config",
    "fitted_specs",
    "paper_lateness",
    "previous_results",
    "publish",
    "rerender",
    "run_bench_config",
    "sim_c_max",
    "simulate_grid",
    "stretched_trace",
    "write_report",
]
