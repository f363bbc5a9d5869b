"""``adabatch bench slo``: its runs, what it measures on them, and its analysis on outcomes
the simulator produces (no Spark: the full experiment is hours on Spark; its ``--quick``
version runs on Spark in tests/bench/test_bench_quick.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from adabatch.bench.experiments import slo_measures as ms
from adabatch.bench.experiments import slo_scenarios as sc
from adabatch.bench.experiments.load import LoadSchedule
from adabatch.bench.experiments.sink_check import SinkCheck
from adabatch.bench.model import Config, Context, Outcome, Settings
from adabatch.bench.registry import get_experiment
from adabatch.metrics import BatchRecord, summarize
from adabatch.runs.simulated import make_scenario, simulate


def test_every_shape_of_every_workload_has_slo_beside_what_a_user_would_run() -> None:
    configs = sc.all_configs(Settings(Path("/tmp/unused"), quick=False))
    groups = {c.group for c in configs}
    assert len(groups) == 3 * 7 + 1
    overload = [c for c in configs if c.group == "reduce / overload"]
    assert [(c.controller, c.params, c.duration_s) for c in overload] == [
        ("slo", {"target": 2.0}, sc.OVERLOAD_S)
    ]
    assert overload[0].profile == f"constant:{sc.OVERLOAD_RATE}"
    for g in groups - {"reduce / overload"}:
        mine = [c for c in configs if c.group == g]
        targets = sorted(c.params["target"] for c in mine if c.controller == "slo")
        if g.endswith("catch-up"):
            assert targets == [2.0]
            caps = [c.source_options["maxRowsPerTrigger"] for c in mine if "-cap-" in c.name]
            rate = sc.RATES[mine[0].workload]
            assert caps == [20 * rate, 100 * rate]
            assert all(c.source_options["startingBacklog"] == "300s" for c in mine)
            assert {c.duration_s for c in mine} == {420.0}  # the backlog, then two minutes
            continue
        assert targets[-3:] == [1.0, 2.0, 5.0]
        assert (0.2 in targets) == g.endswith("/ constant")
        triggers = sorted(c.trigger for c in mine if c.role == "trigger")
        assert triggers == sorted(f"processingTime:{t:g}s" for t in (0.5, 1, 2, 5))
        adaptive = {c.controller for c in mine} & {"fixed-point", "isotonic", "adcom"}
        assert len(adaptive) == (3 if g.split(" / ")[1] in ("constant", "sine", "markov") else 0)
        assert sum(c.role == "spark-default" for c in mine) == 1
    keys = [c for c in configs if c.group == "join / keys"]
    assert all(c.source_options["keys_profile"] == "steps:500@0,40000@40s,500@80s" for c in keys)


def test_a_full_run_warms_the_session_up_longer_than_quick(tmp_path: Path) -> None:
    from adabatch.bench.experiments import slo

    exp = get_experiment("slo")
    full = exp.session_warmup_s(Settings(tmp_path, quick=False))
    assert full == slo.FULL_SESSION_WARMUP_S > slo.QUICK_SESSION_WARMUP_S
    assert exp.session_warmup_s(Settings(tmp_path, quick=True)) == slo.QUICK_SESSION_WARMUP_S


def test_the_warm_up_runs_live_where_the_first_config_starts_behind(tmp_path: Path) -> None:
    from adabatch.bench.runner import warmup_config

    configs = get_experiment("slo").configs(Settings(tmp_path, quick=False))
    behind = next(c for c in configs if c.group == "join / catch-up")
    assert behind.source_options["startingBacklog"] == "300s"
    warm = warmup_config(behind, 180.0)
    assert "startingBacklog" not in warm.source_options
    assert (warm.controller, warm.trigger, warm.duration_s) == ("spark-default", "default", 180.0)
    assert (warm.workload, warm.profile) == (behind.workload, behind.profile)
    keys = next(c for c in configs if c.group == "join / keys")
    assert warmup_config(keys, 180.0).source_options == keys.source_options


def test_only_the_cpu_shape_gets_a_background_load(tmp_path: Path) -> None:
    exp = get_experiment("slo")
    ctx = Context(Settings(tmp_path, quick=False), tmp_path / "slo")
    configs = exp.configs(ctx.settings)
    hooks = {c.name: exp.hook(c, ctx) for c in configs if c.workload == "reduce"}
    assert isinstance(hooks.pop("reduce-overload-slo-2s"), SinkCheck)
    loaded = [name for name, h in hooks.items() if h is not None]
    assert loaded and all("-cpu-" in name for name in loaded)
    hook = hooks[loaded[0]]
    assert isinstance(hook, LoadSchedule)
    assert [(w.start_s, w.end_s) for w in hook.windows] == [(40.0, 80.0)]


def test_the_quick_version_fits_ci() -> None:
    quick = sc.all_configs(Settings(Path("/tmp/unused"), quick=True))
    assert [c.name for c in quick] == [
        "reduce-constant-slo-2s",
        "reduce-constant-spark-default",
        "reduce-constant-trigger-1s",
    ]
    assert sum(c.duration_s for c in quick) <= 130


def batch(i: int, *, latency: float, record_latency: float, records: int = 100) -> BatchRecord:
    """Batch ``i``: 1 s interval cut at ``i + 1``, its latency all processing."""
    p = latency - 1.0
    return BatchRecord(
        batch_id=i, interval_s=1.0, blocks=2, records=records, processing_s=p,
        queue_delay_s=0.0, cut_at=i + 1.0, started_at=i + 1.0, finished_at=i + 1.0 + p,
        latency_s=latency, record_latency_s=record_latency, rate_rps=records,
    )  # fmt: skip


def outcome(name: str, records: list[BatchRecord], *, controller: str = "slo", **kw) -> Outcome:
    config = Config(name, workload="reduce", controller=controller, profile="constant:100",
                    duration_s=float(len(records)), **kw)  # fmt: skip
    summary = summarize(records, controller=controller, workload="reduce",
                        profile="constant:100", duration_s=float(len(records)))  # fmt: skip
    return Outcome(config, summary, tuple(records), Path("."))


def test_catching_up_is_when_record_latency_stays_within_the_target() -> None:
    behind = [batch(i, latency=1.5, record_latency=30.0 - i, records=5000) for i in range(20)]
    live = [batch(i, latency=1.6, record_latency=1.2) for i in range(20, 40)]
    o = outcome("x", behind + live)
    result = ms.catch_up(o, behind_s=10.0, target=2.0)
    assert result.caught_up_s == pytest.approx(behind[-1].finished_at - 10.0)
    assert result.largest_batch == 5000 and result.met_after
    never = outcome("y", behind)
    assert ms.catch_up(never, behind_s=10.0, target=2.0).caught_up_s != pytest.approx(0)
    assert not ms.catch_up(never, behind_s=10.0, target=2.0).met_after
    # a longer first batch on target is the controller's interval choice, not catch-up time
    slow_first = [replace(live[0], finished_at=live[0].finished_at + 0.9), *live[1:]]
    assert ms.catch_up(outcome("z", behind + slow_first), 10.0, 2.0) == result
    assert ms.catch_up(outcome("w", live), behind_s=10.0, target=2.0).caught_up_s == 0.0


def test_the_best_trigger_is_the_cheapest_that_met_the_target() -> None:
    fast = outcome("t1", [batch(i, latency=1.4, record_latency=1.0) for i in range(30)],
                   controller="spark-default", trigger="processingTime:1s")  # fmt: skip
    slow = outcome("t2", [batch(i, latency=2.5, record_latency=1.5) for i in range(30)],
                   controller="spark-default", trigger="processingTime:2s")  # fmt: skip
    fast = Outcome(fast.config, fast.summary.with_values(cpu_s_per_million_records=9.0),
                   fast.records, fast.dir)  # fmt: skip
    slow = Outcome(slow.config, slow.summary.with_values(cpu_s_per_million_records=5.0),
                   slow.records, slow.dir)  # fmt: skip
    assert ms.best_trigger([fast, slow], 2.0) is fast  # the cheaper one missed 2 s
    assert ms.best_trigger([fast, slow], 3.0) is slow
    assert ms.best_trigger([fast, slow], 1.0) is None
    assert ms.over_target(slow, 2.0) == pytest.approx(1.0)


def test_a_shape_measured_on_two_boots_fails_the_one_machine_verdict() -> None:
    """Shapes may run on different boots (CPU compares within a shape); a shape may not."""
    from adabatch.bench.experiments import slo

    def on(shape: str, boot: str | None) -> Outcome:
        o = outcome("x", [batch(i, latency=1.5, record_latency=1.0) for i in range(5)],
                    group=f"reduce / {shape}", labels={"shape": shape})  # fmt: skip
        return Outcome(o.config, o.summary.with_values(host_boot=boot), o.records, o.dir)

    (one,) = slo._one_machine_verdicts([on("sine", "a"), on("sine", "a"), on("cpu", "b")])
    assert one.holds and one.evidence == "3 runs on 2 boot(s)"
    (two,) = slo._one_machine_verdicts([on("sine", "a"), on("sine", "b"), on("cpu", "b")])
    assert not two.holds and two.evidence.endswith("mixed within sine")
    (unknown,) = slo._one_machine_verdicts([on("cpu", "a"), on("cpu", None)])
    assert not unknown.holds and "1 without a boot id; mixed within cpu" in unknown.evidence


def test_slo_runs_of_two_versions_of_the_controller_fail_the_one_code_verdict() -> None:
    from adabatch.bench.experiments import slo

    def ran(code: str | None, controller: str = "slo") -> Outcome:
        o = outcome("x", [batch(i, latency=1.5, record_latency=1.0) for i in range(5)],
                    controller=controller, params={"target": 2.0})  # fmt: skip
        return Outcome(o.config, o.summary.with_values(controller_code=code), o.records, o.dir)

    (one,) = slo._one_code_verdicts([ran("abc"), ran("abc"), ran(None, "spark-default")])
    assert one.holds and one.evidence == "2 slo runs on 1 version(s) (abc)"
    (two,) = slo._one_code_verdicts([ran("abc"), ran("def")])
    assert not two.holds and "2 version(s) (abc, def)" in two.evidence
    (kept,) = slo._one_code_verdicts([ran("abc"), ran(None)])
    assert not kept.holds and kept.evidence.endswith("1 without a code fingerprint")


def test_one_trigger_setting_for_every_shape_is_compared_by_its_ratios_per_shape() -> None:
    """slo against the one trigger that met the target on every shape: the geometric mean
    of the per-shape CPU ratios, which a shape measured on a slower boot leaves alone."""
    from adabatch.bench.experiments import slo

    def run(shape: str, cpu: float, *, trigger: str | None = None, lat: float = 1.5) -> Outcome:
        records = [batch(i, latency=lat, record_latency=1.0) for i in range(30)]
        if trigger is None:
            o = outcome(f"{shape}-slo", records, params={"target": 2.0},
                        group=f"reduce / {shape}", labels={"shape": shape})  # fmt: skip
        else:
            o = outcome(f"{shape}-t{trigger[-2]}", records, controller="spark-default",
                        trigger=trigger, group=f"reduce / {shape}",
                        labels={"shape": shape})  # fmt: skip
        summary = o.summary.with_values(cpu_s_per_million_records=cpu)
        return Outcome(o.config, summary, o.records, o.dir)

    one_s, two_s = "processingTime:1s", "processingTime:2s"
    # the sine shape ran on a slower boot: slo's and the 1 s trigger's CPU 4x the constant's
    runs = [
        run("constant", 40.0), run("constant", 50.0, trigger=one_s),
        run("sine", 160.0), run("sine", 200.0, trigger=one_s),
        run("constant", 30.0, trigger=two_s, lat=2.5), run("sine", 60.0, trigger=two_s),
    ]  # fmt: skip
    (verdict,) = slo._one_setting_verdicts(runs)
    assert verdict.holds  # the 2 s trigger missed 2 s on the constant shape
    assert verdict.evidence == (
        "slo / processingTime:1s: constant 0.80x, sine 0.80x; geometric mean 0.80x"
    )
    # slo 10 % over the trigger on the slow boot's shape, 20 % under on the other: by the
    # mean CPU (130 against 125) the slower boot's shape would decide
    runs[2] = run("sine", 220.0)
    (verdict,) = slo._one_setting_verdicts(runs)
    assert verdict.holds and "sine 1.10x; geometric mean 0.94x" in verdict.evidence
    runs[2] = run("sine", 260.0)
    (verdict,) = slo._one_setting_verdicts(runs)
    assert not verdict.holds and "geometric mean 1.02x" in verdict.evidence
    # a shape where slo did not run leaves the ratio unknown, and the verdict fails
    (verdict,) = slo._one_setting_verdicts([r for r in runs if r.name != "sine-slo"])
    assert not verdict.holds and "sine -" in verdict.evidence


def simulated(config: Config, settings: Settings) -> Outcome:
    """The simulator standing in for Spark: a processingTime trigger as a static interval,
    Spark's default as back-to-back 0.25 s batches."""
    controller, params = config.controller, dict(config.params)
    if config.role == "trigger":
        seconds = float(config.trigger.split(":")[1].rstrip("s"))
        controller, params = "static", {"interval": seconds}
    elif config.role == "spark-default":
        controller, params = "static", {"interval": 0.25}
    scenario = make_scenario(config.workload, config.profile, config.duration_s,
                             warmup=config.skip_s or 0.0)  # fmt: skip
    result = simulate(scenario, controller, params)
    run_dir = settings.out / "slo" / config.name
    run_dir.mkdir(parents=True, exist_ok=True)
    busy = sum(r.processing_s for r in result.records)
    cpu = 1e6 * busy / max(1, sum(r.records for r in result.records))
    summary = result.summary.with_values(cpu_s_per_million_records=cpu)
    return Outcome(config, summary, result.records, run_dir)


def test_the_quick_analysis_on_simulated_outcomes(tmp_path: Path) -> None:
    settings = Settings(tmp_path, quick=True)
    exp = get_experiment("slo")
    outcomes = [simulated(c, settings) for c in exp.configs(settings)]
    analysis = exp.analyze(Context(settings, tmp_path / "slo"), outcomes)
    assert analysis.figures and all(f.path.stat().st_size > 5_000 for f in analysis.figures)
    claims = {v.claim: v for v in analysis.verdicts}
    met = next(v for c, v in claims.items() if "meets a 2 s target" in c)
    assert met.headline and met.holds, met.evidence
    default = next(v for c, v in claims.items() if "Spark's default" in c)
    assert default.headline and default.holds, default.evidence
    assert "0.75x Spark's default" in default.claim  # --quick asserts the direction
    assert any("1.15x the best trigger" in c for c in claims)
    table = analysis.tables[0]
    assert "p95 batch (s)" in table.columns and len(table.rows) == 3


def test_the_overload_sink_check_finds_a_lost_or_doubled_record(tmp_path: Path) -> None:
    """The sink against the generator's first records: equal, then one record short on a
    key, then the verdict on a run whose queue grew."""
    from adabatch.bench.experiments import slo
    from adabatch.bench.experiments.live_producer import TOTALS_TABLE
    from adabatch.bench.experiments.sink_check import SINK_FILE, check_sink
    from adabatch.runs.produce import generator_totals

    config = Config("reduce-overload-slo-2s", workload="reduce", controller="slo",
                    profile="constant:1000", duration_s=10.0, params={"target": 2.0},
                    group="reduce / overload", labels={"shape": "overload"})  # fmt: skip
    totals = generator_totals(config.profile, 5000, seed=4, keys=config.keys)

    def write(rows: dict) -> None:
        (tmp_path / "results.sqlite").unlink(missing_ok=True)
        with sqlite3.connect(tmp_path / "results.sqlite") as con:
            con.execute(f"CREATE TABLE {TOTALS_TABLE} (run_id TEXT, key BIGINT, records BIGINT, "
                        "value_sum DOUBLE PRECISION)")  # fmt: skip
            con.executemany(f"INSERT INTO {TOTALS_TABLE} VALUES ('r', ?, ?, ?)",
                            [(k, n, v) for k, (n, v) in rows.items()])  # fmt: skip

    write(totals)
    assert check_sink(config, tmp_path, seed=4) == {
        "committed": 5000, "exactly_once": True, "mismatched_keys": 0,
    }  # fmt: skip
    assert check_sink(config, tmp_path, seed=5)["exactly_once"] is False  # other records
    key = next(iter(totals))
    write({**totals, key: (totals[key][0] - 1, totals[key][1])})
    assert check_sink(config, tmp_path, seed=4)["mismatched_keys"] >= 1

    def run(queue: int) -> Outcome:
        records = tuple(
            BatchRecord(
                i,
                1.0,
                2,
                100,
                0.9,
                0.0,
                i + 1.0,
                i + 1.0,
                i + 1.9,
                1.9,
                1.4,
                100.0,
                max_records=100,
                queue_len=queue,
                controller_state={"mode": "overload"},
            )
            for i in range(5)
        )
        summary = summarize(records, controller="slo", workload="reduce",
                            profile=config.profile, duration_s=10.0)  # fmt: skip
        return Outcome(config, summary, records, tmp_path)

    (tmp_path / SINK_FILE).write_text('{"committed": 500, "exactly_once": true}')
    ok = slo._overload_verdict("reduce / overload", run(1))
    assert ok.holds and ok.headline and "5 of 5 batches capped" in ok.evidence
    assert not slo._overload_verdict("reduce / overload", run(5)).holds
    (tmp_path / SINK_FILE).write_text('{"committed": 500, "exactly_once": false}')
    assert not slo._overload_verdict("reduce / overload", run(1)).holds
