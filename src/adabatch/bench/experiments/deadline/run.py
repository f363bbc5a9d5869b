"""Running the deadline bench on Spark (:func:`run_bench_config`) and redoing its report
without Spark (:func:`rerender`)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adabatch.bench import machine, resume
from adabatch.bench.experiments.deadline.config import RESUME_KEYS, BenchConfig
from adabatch.bench.experiments.deadline.report import write_report
from adabatch.bench.experiments.deadline.rows import (
    BaselineRow,
    BenchResults,
    DataFacts,
    MultiRow,
    SimulationRow,
    SingleRow,
    rows_from_json,
)
from adabatch.bench.experiments.deadline.simulation import simulate_grid
from adabatch.deadline.core.single import plan_single
from adabatch.deadline.core.spec import DeadlineScenario
from adabatch.deadline.spark.baseline import Trigger
from adabatch.deadline.spark.cost_profile import (
    CostProfile,
    agg_with_margin,
    cost_profile_from_json,
    default_sizes,
    profile_query,
    refit,
    with_margin,
)
from adabatch.deadline.spark.queries import QUERY_NAMES
from adabatch.deadline.spark.tpch import Manifest, prepare
from adabatch.errors import AdabatchError
from adabatch.outputs import dumps_json, write_atomic
from adabatch.report.progress import ProgressLine

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class _Recorder:
    """Appends raw records to the bench's JSON-lines files, each tagged with the run of
    the command that wrote it (``--resume`` appends; a rerun row's jobs stay apart)."""

    def __init__(self, out: Path, *, append: bool = False, run: int = 1) -> None:
        self.run = run
        self.batches = out / "batches.jsonl"
        self.progress = out / "streaming_progress.jsonl"
        for path in (self.batches, self.progress):
            if not (append and path.is_file()):
                path.write_text("", encoding="utf-8")

    def job(self, section: str, **tags: Any) -> Callable[[Any], None]:
        def write(job: Any) -> None:
            line = {"run": self.run, "section": section, **tags, **job.to_json()}
            with self.batches.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, separators=(",", ":")) + "\n")

        return write

    def micro_batch(self, **tags: Any) -> Callable[[dict[str, Any]], None]:
        def write(p: dict[str, Any]) -> None:
            line = {"run": self.run, **tags, **p}
            with self.progress.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, separators=(",", ":")) + "\n")

        return write


def save_results(out: Path, results: BenchResults | dict[str, Any]) -> None:
    """Write ``OUT/results.json`` (atomically: a reader never sees half of it)."""
    data = results.to_json() if isinstance(results, BenchResults) else results
    text = dumps_json(data, indent=1, default=str) + "\n"
    write_atomic(out / "results.json", text.encode("utf-8"))


def previous_results(config: BenchConfig) -> dict[str, Any] | None:
    """``OUT/results.json`` to continue from with ``--resume`` (``None``: start afresh),
    checked to come from the same data settings, margin and profile sizes."""
    if not config.resume:
        return None
    return resume.previous_results(config.out / "results.json", config.to_json(), RESUME_KEYS)


@dataclass(frozen=True)
class _Kept:
    """What a resumed bench keeps from the results it continues (empty when fresh)."""

    profiles: dict[str, CostProfile]
    single: dict[tuple[str, float], SingleRow]
    baseline: dict[tuple[str, str], BaselineRow]
    multi: list[MultiRow] | None

    @classmethod
    def of(cls, previous: dict[str, Any], config: BenchConfig) -> _Kept:
        where = config.out / "results.json"
        profiles = {
            q: refit(cost_profile_from_json(data, f"profile {q!r} in {where}"))
            for q, data in previous.get("profiles", {}).items()
        }
        single = [SingleRow.from_json(r) for r in previous.get("single", [])]
        baseline = [BaselineRow.from_json(r) for r in previous.get("baseline", [])]
        same_multi = previous.get("config", {}).get("spark_multi") == list(config.spark_multi)
        multi = previous.get("spark_multi") if same_multi else None
        return cls(
            profiles,
            {(r.query, r.factor): r for r in single},
            # rows name the trigger by its label (processing:5s), the config as given
            {(r.query, Trigger.parse(r.trigger).label): r for r in baseline},
            None if multi is None else [MultiRow.from_json(m) for m in multi],
        )


def _data_facts(manifest: Manifest) -> DataFacts:
    return DataFacts(
        scale_factor=manifest.scale_factor,
        slots=len(manifest.slots),
        rate_slots_per_s=manifest.rate,
        window_s=manifest.window_end - manifest.window_start,
        orders=manifest.total("orders"),
        lineitem=manifest.total("lineitem"),
    )


def _start(config: BenchConfig, manifest: Manifest, previous: dict[str, Any]) -> BenchResults:
    """The results of this run before it measures anything: this run's number, config and
    data, and every kept section as it was (a resumed bench stopped after its profiles
    once saved a results.json without them)."""
    return BenchResults(
        config=config.to_json(),
        machine=previous.get("machine") or machine.run_facts(),
        runs=int(previous.get("runs", 1 if previous else 0)) + 1,
        data=_data_facts(manifest),
        single=rows_from_json(SingleRow, previous.get("single")),
        baseline=rows_from_json(BaselineRow, previous.get("baseline")),
        simulation=rows_from_json(SimulationRow, previous.get("simulation")),
        spark_multi=rows_from_json(MultiRow, previous.get("spark_multi")),
    )


class _Steps:
    """The bench's steps on one progress line, ``[done/total minutes] step``: rewritten in
    place on a terminal, one line per step in a log (the bench runs for hours)."""

    def __init__(self, total: int = 0) -> None:
        self.line = ProgressLine(every_s=0.0)
        self.total = total
        self.done = 0
        self.started = time.monotonic()

    def __enter__(self) -> _Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        self.show("done" if exc[0] is None else f"stopped by {exc[0].__name__}")
        self.line.end()

    def show(self, what: str) -> None:
        minutes = (time.monotonic() - self.started) / 60
        self.line.show(f"[{self.done}/{self.total} {minutes:5.1f} min] {what}")

    def advance(self) -> None:
        self.done += 1


class _Bench:
    """One run of the bench: the sections in order, each saving ``results.json`` after
    every row so an interrupted bench loses at most the row it was running."""

    def __init__(self, config: BenchConfig, manifest: Manifest, previous: dict[str, Any]):
        self.config = config
        self.out = config.out
        self.manifest = manifest
        self.results = _start(config, manifest, previous)
        self.run = self.results.runs
        self.kept = _Kept.of(previous, config)
        self.recorder = _Recorder(self.out, append=bool(previous), run=self.run)
        self.started = time.monotonic()
        self.earlier_s = float(previous.get("elapsed_s") or 0.0)
        self.profiles: dict[str, CostProfile] = {}
        self.warmed: set[str] = set()
        self.spark: SparkSession | None = None
        self.bar = _Steps()

    def steps(self) -> int:
        """How many steps this run has (kept rows are not run again)."""
        config, kept = self.config, self.kept
        steps = sum(q not in kept.profiles for q in config.queries)
        if "single" not in config.skip:
            steps += sum((q, f) not in kept.single for q in config.queries for f in config.factors)
        if "baseline" not in config.skip:
            steps += sum(
                (q, Trigger.parse(t).label) not in kept.baseline
                for q in config.queries
                for t in config.triggers
            )
        if "multi" not in config.skip:
            steps += 1 + (1 if config.spark_multi and kept.multi is None else 0)
        return steps

    def save(self) -> None:
        """Write results.json with the time spent so far (this run and the kept ones)."""
        self.results.elapsed_s = self.earlier_s + time.monotonic() - self.started
        save_results(self.out, self.results)

    def step(self, description: str) -> None:
        self.bar.show(description)

    def done(self) -> None:
        self.bar.advance()

    def run_all(self, spark: SparkSession) -> None:
        """Every section the config asks for, under one progress bar."""
        self.spark = spark
        self.bar = _Steps(self.steps())
        with self.bar:
            self.step("deadline bench")
            self.run_profiles()
            self.warmed = set(self.profiles) - set(self.kept.profiles)
            if "single" not in self.config.skip:
                for name in self.config.queries:
                    self.run_single(name)
            if "baseline" not in self.config.skip:
                for name in self.config.queries:
                    self.run_baseline(name)
            if "multi" not in self.config.skip:
                self.run_simulation()
                self.run_spark_multi()

    def run_profiles(self) -> None:
        """1. Profiles (Fig. 3, 4): kept ones refitted, the others measured."""
        for name in self.config.queries:
            path = self.out / "profiles" / f"{name}.json"
            if name in self.kept.profiles:
                self.profiles[name] = self.kept.profiles[name]
                self.profiles[name].save(path)  # refitted
                continue
            self.step(f"profile {name}")
            sizes = self.config.sizes
            profile = profile_query(
                self.spark,
                self.manifest,
                name,
                self.out / "work" / "profile" / name,
                sizes=list(sizes) if sizes else default_sizes(len(self.manifest.slots)),
                on_job=self.recorder.job("profile", name=name),
            )
            profile.save(path)
            self.profiles[name] = profile
            self.done()
        # kept profiles of queries not asked for this time stay in the results
        self.results.profiles = {
            **{k: v.to_json() for k, v in self.kept.profiles.items()},
            **{k: v.to_json() for k, v in self.profiles.items()},
        }
        self.save()

    def warm(self, name: str) -> None:
        """Run ``name`` once unmeasured unless this process has run it: a resumed bench
        starts in a new JVM, whose first jobs ran at 3x their model (CQ1 1D, 1.1 s late).
        The profile sweep starts with the same warm-up."""
        from adabatch.deadline.spark.runner import run_in_batches

        if name not in self.warmed:
            self.step(f"warm-up {name}")
            run_in_batches(self.spark, self.manifest, name, 2, self.out / "work" / "warmup" / name)
            self.warmed.add(name)

    def run_single(self, name: str) -> None:
        """2. Single-query deadlines on Spark (Fig. 6): the factors not kept."""
        todo = [f for f in self.config.factors if (name, f) not in self.kept.single]
        if todo:
            self.warm(name)
        for f in todo:
            self.step(f"single {name} {f:g}D")
            row = self.single_row(name, f)
            self.results.single = [*(self.results.single or []), row]
            self.save()
            self.done()

    def single_row(self, name: str, factor: float) -> SingleRow:
        """Plan ``name`` with Function 1 for ``window end + factor·D`` and run the plan."""
        from adabatch.deadline.spark.runner import run_single, spec_for

        p, margin = self.profiles[name], self.config.margin
        d = p.single_batch_cost
        deadline = self.manifest.window_end + factor * d
        spec = spec_for(
            self.manifest,
            name,
            deadline=deadline,
            cost=with_margin(p.cost, margin),
            agg_cost=agg_with_margin(p.agg_cost, margin),
        )
        plan = plan_single(spec, ahead=True)
        row = SingleRow(
            run=self.run,
            query=name,
            factor=factor,
            d=d,
            deadline=deadline,
            feasible=plan.feasible,
            planned_batches=plan.num_batches,
            planned_cost=plan.cost if plan.feasible else None,
            earliest_completion=plan.earliest_completion,
            load_avg=machine.load_avg()[0],
        )
        if not plan.feasible:
            return row
        try:
            done = run_single(
                self.spark,
                self.manifest,
                spec,
                self.out / "work" / "single" / f"{name}-{factor:g}",
                plan=plan,
                on_job=self.recorder.job("single", name=name, factor=factor),
            )
        except AdabatchError as exc:  # recorded; the bench goes on
            return replace(row, batches=0, cost=None, error=str(exc))
        return replace(
            row,
            met=done.met,
            batches=done.batches,
            cost=done.cost,
            normalised_cost=done.cost / d,
            ran=True,
            completion=done.completion,
            late_s=max(0.0, (done.completion or math.inf) - deadline),
            correct=done.correct,
            differences=None if done.differences is None else tuple(done.differences),
        )

    def run_baseline(self, name: str) -> None:
        """3. The query as Structured Streaming (Fig. 5), under each trigger not kept."""
        from adabatch.deadline.spark import baseline

        d = self.profiles[name].single_batch_cost
        for trig in self.config.triggers:
            if (name, Trigger.parse(trig).label) in self.kept.baseline:
                continue
            self.warm(name)
            self.step(f"streaming {name} {trig}")
            s = baseline.run_streaming(
                self.spark,
                self.manifest,
                name,
                trig,
                self.out / "work" / "baseline" / name / trig.replace(":", "-"),
                deadline=self.manifest.window_end + d,
                on_batch=self.recorder.micro_batch(name=name, trigger=trig),
            )
            measured = {k: v for k, v in s.to_json().items() if k != "answer"}
            row = BaselineRow.from_json(
                {
                    "run": self.run,
                    **measured,
                    "D": d,
                    "load_avg": machine.load_avg()[0],
                    "ratio_to_single_batch": s.cost / d if s.failure is None else None,
                }
            )
            self.results.baseline = [*(self.results.baseline or []), row]
            self.save()
            self.done()

    def run_simulation(self) -> None:
        """4. Multi-query scheduling in simulation (Fig. 7, 8, 10, 11) with every query
        profiled so far, this run's and the kept ones."""
        self.step("multi-query simulation")
        known = {**self.kept.profiles, **self.profiles}
        ordered = [known[q] for q in QUERY_NAMES if q in known]
        self.results.simulation = simulate_grid(self.manifest, ordered, self.config)
        self.save()
        self.done()

    def run_spark_multi(self) -> None:
        """5. The multi-query loop on Spark, EDF and LLF (kept when the queries match)."""
        from adabatch.deadline.core.simulate import paper_deadlines
        from adabatch.deadline.spark.runner import run_multi, spec_for

        config = self.config
        if self.kept.multi is not None:
            self.results.spark_multi = self.kept.multi
            return
        if not config.spark_multi:
            return
        self.step("multi-query on Spark")
        known = {**self.kept.profiles, **self.profiles}
        specs = [
            spec_for(
                self.manifest,
                q,
                deadline=self.manifest.window_end,
                cost=with_margin(known[q].cost, config.margin),
                agg_cost=agg_with_margin(known[q].agg_cost, config.margin),
            )
            for q in config.spark_multi
            if q in known
        ]
        c_max = max(p.single_batch_cost for p in known.values())
        specs = paper_deadlines(specs, 1.0, c_max)
        outcomes = []
        for strategy in ("edf", "llf"):
            scenario = DeadlineScenario(tuple(specs), strategy=strategy, rsf=0.5)
            result, runs = run_multi(
                self.spark,
                self.manifest,
                scenario,
                self.out / "work" / "multi" / strategy,
                on_job=self.recorder.job("multi", strategy=strategy),
            )
            outcomes.append(
                MultiRow(strategy, result.to_json(), {r.query: r.correct for r in runs})
            )
        self.results.spark_multi = outcomes
        self.save()
        self.done()

    def finish(self) -> None:
        """Rows kept from earlier runs and new ones in the report's order; the load at
        the end; the last save."""
        order = {q: i for i, q in enumerate(QUERY_NAMES)}
        if self.results.single is not None:
            self.results.single.sort(key=lambda r: (order.get(r.query, 99), -r.factor))
        if self.results.baseline is not None:
            trig = {t: i for i, t in enumerate(self.config.triggers)}
            self.results.baseline.sort(
                key=lambda r: (order.get(r.query, 99), trig.get(r.trigger, 99))
            )
        self.results.machine["load_avg_end"] = machine.load_avg()
        self.save()


def run_bench_config(config: BenchConfig) -> Path:
    """Run every section of the bench; returns the markdown report's path."""
    from adabatch.deadline.spark.runner import SPARK_CONF
    from adabatch.spark import get_spark

    config.out.mkdir(parents=True, exist_ok=True)
    manifest = prepare(
        config.data, scale_factor=config.scale_factor, slots=config.slots, rate=config.rate
    )
    bench = _Bench(config, manifest, previous_results(config) or {})
    bench.run_all(get_spark(config.master, "adabatch-deadline-bench", SPARK_CONF))
    bench.finish()
    return write_report(bench.results, config.out, config.docs)


def rerender(config: BenchConfig) -> Path:
    """Recompute the simulated section from the saved profiles of a finished (or
    interrupted) bench in ``config.out`` and rewrite the report; no Spark runs."""
    from adabatch.deadline.spark.tpch import load_manifest

    path = config.out / "results.json"
    if not path.is_file():
        msg = f"no bench results in {str(config.out)!r} (results.json is missing)"
        raise AdabatchError(msg)
    results = json.loads(path.read_text(encoding="utf-8"))
    manifest = load_manifest(Path(results["config"]["data"]))
    saved = results.get("profiles", {})
    profiles = [
        cost_profile_from_json(saved[q], f"profile {q!r} in {path}")
        for q in QUERY_NAMES
        if q in saved
    ]
    if profiles and "multi" not in config.skip:
        results["simulation"] = [r.to_json() for r in simulate_grid(manifest, profiles, config)]
        save_results(config.out, results)
    return write_report(results, config.out, config.docs)
