"""The bench framework without Spark: configs, ratios within a group, tables, CSV, the
Markdown section and results page, directory rules, the registry and the CLI's errors."""

from __future__ import annotations

import csv
import gzip
import json
import math
from pathlib import Path

import pytest
from ci_quick import NOT_IN_CI

from adabatch.bench import model, ratios, registry, report, resume, runner
from adabatch.bench.model import (
    Analysis,
    Config,
    Experiment,
    ExperimentResult,
    Figure,
    Outcome,
    Settings,
    Verdict,
)
from adabatch.cli import main
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord, summarize


def record(i: int, x: float, p: float, q: float = 0.0) -> BatchRecord:
    cut = (i + 1) * x
    return BatchRecord(
        batch_id=i,
        interval_s=x,
        blocks=2,
        records=100,
        processing_s=p,
        queue_delay_s=q,
        cut_at=cut,
        started_at=cut + q,
        finished_at=cut + q + p,
        latency_s=x + q + p,
        record_latency_s=x / 2 + q + p,
        rate_rps=100 / x,
    )


def outcome(
    name: str,
    controller: str,
    latency: float,
    cpu: float,
    *,
    stable: bool = True,
    group: str = "g",
    trigger: str = "default",
    interval: float = 1.0,
) -> Outcome:
    params = {"interval": interval} if controller == "static" else {}
    cfg = Config(name, workload="reduce", controller=controller, profile="constant:100",
                 duration_s=10, params=params, trigger=trigger, group=group)  # fmt: skip
    records = (record(0, interval, 0.4),)
    summary = summarize(
        records, controller=controller, workload="reduce", profile="constant:100", duration_s=10
    ).with_values(
        stable=stable,
        mean_latency_s=latency,
        p95_latency_s=latency * 1.2,
        cpu_s_per_million_records=cpu,
        busy_fraction=0.5,
        mean_interval_s=interval,
    )
    return Outcome(cfg, summary, records, Path("/nonexistent") / name)


def test_config_roles_names_and_baselines() -> None:
    base = {"workload": "reduce", "profile": "constant:100", "duration_s": 10}
    assert Config("a", controller="static", **base).role == "static"
    assert Config("b", controller="fixed-point", **base).role == "adaptive"
    sd, t1, t2 = model.spark_baselines(triggers=(1.0, 2.5), prefix="x-", **base)
    assert (sd.name, sd.role, sd.trigger) == ("x-spark-default", "spark-default", "default")
    assert (t1.name, t1.role, t1.trigger) == ("x-trigger-1s", "trigger", "processingTime:1s")
    assert t2.trigger == "processingTime:2.5s"
    sweep = model.static_sweep((0.5, 2), blocks=4, **base)
    assert [c.name for c in sweep] == ["static-0.5s", "static-2s"]
    assert sweep[0].params == {"interval": 0.5, "blocks": 4}
    cfg = sweep[0].run_config(Path("/tmp/r"), seed=7, master="local[2]")
    assert (cfg.seed, cfg.master, cfg.params["interval"], cfg.controller) == (
        7, "local[2]", 0.5, "static")  # fmt: skip


@pytest.mark.parametrize("name", ["Upper", "has space", "", "-dash", "a/b", "section.md"])
def test_config_rejects_bad_names(name: str) -> None:
    with pytest.raises(AdabatchError, match="config name"):
        Config(name, workload="reduce", controller="static", profile="constant:1", duration_s=1)


def test_config_rejects_non_positive_duration() -> None:
    with pytest.raises(AdabatchError, match="duration_s = 0"):
        Config("a", workload="reduce", controller="static", profile="constant:1", duration_s=0)


def test_oracle_is_the_best_stable_static_within_the_group() -> None:
    outs = [
        outcome("s-0.5", "static", 0.9, 100, stable=False, interval=0.5),
        outcome("s-1", "static", 2.0, 80, interval=1.0),
        outcome("s-2", "static", 3.0, 60, interval=2.0),
        outcome("other-s", "static", 1.0, 50, group="h"),
        outcome("fp", "fixed-point", 2.5, 70),
        outcome("sd", "spark-default", 1.0, 140),
        outcome("t1", "spark-default", 1.5, 90, trigger="processingTime:1s"),
    ]
    assert ratios.oracle(outs, "g").name == "s-1"  # the unstable 0.5 s is faster but excluded
    assert ratios.oracle(outs, "h").name == "other-s"
    assert ratios.spark_default(outs, "g").name == "sd"
    assert ratios.spark_default(outs, "h") is None
    r = ratios.ratios(model.by_name(outs, "fp"), outs)
    assert r["latency_to_oracle"] == pytest.approx(1.25)
    assert r["cpu_to_oracle"] == pytest.approx(70 / 80)
    assert r["latency_to_default"] == pytest.approx(2.5)
    assert r["cpu_to_default"] == pytest.approx(0.5)
    lone = ratios.ratios(model.by_name(outs, "other-s"), outs)
    assert lone["latency_to_oracle"] == 1.0 and math.isnan(lone["latency_to_default"])
    with pytest.raises(AdabatchError, match="no outcome named 'zz'"):
        model.by_name(outs, "zz")


def test_no_stable_static_means_no_oracle_and_the_table_says_so() -> None:
    outs = [outcome("s", "static", 1.0, 10, stable=False), outcome("fp", "fixed-point", 2, 5)]
    assert ratios.oracle(outs) is None
    table = report.standard_table(outs)
    assert "none (no static interval was stable)" in table.note
    row = dict(zip(table.columns, table.rows[1], strict=True))
    assert row["vs oracle"] == "-" and row["stable"] == "yes"
    assert dict(zip(table.columns, table.rows[0], strict=True))["stable"] == "NO"


def test_standard_table_has_cost_next_to_latency_and_groups_split() -> None:
    outs = [
        outcome("a-s", "static", 2.0, 80, group="a"),
        outcome("a-sd", "spark-default", 1.0, 160, group="a"),
        outcome("b-s", "static", 4.0, 40, group="b"),
    ]
    tables = report.group_tables(outs)
    assert [t.title for t in tables] == ["a", "b"]
    cols = tables[0].columns
    for needed in ("latency x+q+p (s)", "p95 latency (s)", "vs oracle", "vs spark-default",
                   "busy", "CPU s/M rec"):  # fmt: skip
        assert needed in cols
    row = dict(zip(cols, tables[0].rows[0], strict=True))
    assert row["vs spark-default"] == "2.00x" and row["CPU vs spark-default"] == "0.50x"
    md = tables[0].markdown()
    assert md.count("\n|") == 4  # header, rule, two rows
    assert "| a-sd | Spark default trigger |" in md


def test_fmt_cells() -> None:
    assert report.fmt(None) == "-" and report.fmt(math.nan) == "-"
    assert report.fmt(True) == "yes" and report.fmt(False) == "NO"
    assert report.fmt(1234.5) == "1234" and report.fmt(0.12345, 2) == "0.12"
    assert report.fmt_ratio(math.inf) == "-" and report.fmt_ratio(1.234) == "1.23x"


def test_phase_means_split_by_stream_time() -> None:
    recs = tuple(record(i, 1.0, 0.2 if i < 5 else 0.8) for i in range(10))
    o = Outcome(outcome("x", "static", 1, 1).config, {}, recs, Path("/x"))
    phases = [("before", 0.0, 5.0), ("after", 5.0, math.inf)]
    m = report.phase_means(o, phases, skip_s=1.0)
    # batch i is cut at i+1 s of stream time; cut at 1..4 before (the 0 s skip drops none),
    # 5..10 after
    assert m["before"]["batches"] == 4 and m["before"]["processing_s"] == pytest.approx(0.2)
    assert m["after"]["batches"] == 6
    assert m["after"]["processing_s"] == pytest.approx((0.2 + 5 * 0.8) / 6)
    table = report.phase_table([o], phases, "t")
    assert [r[1] for r in table.rows] == ["before", "after"]
    # settling: batches whose data began less than 2 s into "after" (cut at 5, 6, 7 s) go
    settled = report.phase_means(o, phases, skip_s=1.0, settle_s=2.0)
    assert settled["before"]["batches"] == 4
    assert settled["after"]["batches"] == 3
    assert settled["after"]["processing_s"] == pytest.approx(0.8)


class _Tiny(Experiment):
    name = "tiny"
    title = "Tiny"
    paper = "nothing"


def _result(tmp_path: Path, outs: list[Outcome], verdicts: tuple[Verdict, ...]) -> ExperimentResult:
    exp_dir = tmp_path / "out" / "tiny"
    exp_dir.mkdir(parents=True)
    fig = exp_dir / "f.png"
    fig.write_bytes(b"png")
    extra = exp_dir / "extra.json"
    extra.write_text('{"s": 1}')
    csv_path = report.write_summaries_csv(exp_dir / "summaries.csv", outs)
    analysis = Analysis(
        tables=(report.standard_table(outs),),
        figures=(Figure(fig, "a figure"),),
        data=(extra,),
        shows="It shows things.",
        paper="It agrees.",
        verdicts=verdicts,
    )
    settings = Settings(tmp_path / "out", quick=True, seed=3, command="adabatch bench tiny")
    return ExperimentResult(_Tiny(), settings, tuple(outs), analysis, exp_dir,
                            exp_dir / "section.md", csv_path, 12.0)  # fmt: skip


def test_csv_section_and_results_page(tmp_path: Path) -> None:
    outs = [outcome("s", "static", 2.0, 80), outcome("sd", "spark-default", 1.0, 160)]
    verdicts = (Verdict("it works", True, "2 < 3", headline=True), Verdict("side", False))
    result = _result(tmp_path, outs, verdicts)
    rows = list(csv.DictReader(result.csv.open()))
    assert [r["config"] for r in rows] == ["s", "sd"]
    assert rows[0]["role"] == "static" and float(rows[0]["latency_to_default"]) == 2.0
    assert rows[1]["stable"] == "True" and rows[0]["cpu_s_per_million_records"] == "80"
    section = report.write_section(result).read_text()
    assert "adabatch bench tiny" in section and "![a figure](f.png)" in section
    assert "**it works** — holds (headline). 2 < 3" in section
    assert "**side** — does NOT hold." in section
    docs = tmp_path / "docs"
    page = report.write_results_page(
        [result],
        docs,
        command="adabatch bench all",
        facts={"cores": "2"},
        missing=["pid (module not written yet)"],
    )
    text = page.read_text()
    assert (docs / "results" / "tiny" / "f.png").is_file()
    assert (docs / "results" / "tiny" / "summaries.csv").is_file()
    assert (docs / "results" / "tiny" / "extra.json").read_text() == '{"s": 1}'
    assert "; [results/tiny/extra.json](results/tiny/extra.json)." in text
    assert "![a figure](results/tiny/f.png)" in text
    assert "Machine: cores 2." in text and "Not run: pid (module not written yet)." in text
    assert "- `tiny`: it works — holds." in text
    raw = docs / "results" / "tiny" / report.RAW_METRICS
    with gzip.open(raw, "rt") as fh:
        lines = [json.loads(line) for line in fh]
    assert len(lines) == sum(len(o.records) for o in outs)
    assert {x["config"] for x in lines} == {"s", "sd"}
    assert lines[0]["processing_s"] == outs[0].records[0].processing_s
    assert "(results/tiny/metrics.jsonl.gz)" in text
    assert "--quick" not in text
    quick = report.write_results_page(
        [result], docs, command="adabatch bench all --quick", facts={}, quick=True
    )
    assert "**These are the `--quick` versions**" in quick.read_text()


def test_prepare_dir_refuses_to_mix_runs(tmp_path: Path) -> None:
    d = tmp_path / "exp"
    resume.prepare_dir(d, force=False, resume=False)
    (d / "x").write_text("1")
    with pytest.raises(AdabatchError, match="already holds results"):
        resume.prepare_dir(d, force=False, resume=False)
    with pytest.raises(AdabatchError, match="not written by adabatch bench"):
        resume.prepare_dir(d, force=True, resume=False)
    assert (d / "x").exists()
    resume.prepare_dir(d, force=False, resume=True)
    assert (d / "x").exists()
    (d / resume.MARKER).write_text("{}")
    resume.prepare_dir(d, force=True, resume=False)
    assert d.is_dir() and not any(d.iterdir())


def test_registry_knows_the_issue_order_and_rejects_unknown_names() -> None:
    assert registry.names()[:5] == [
        "static-vs-adaptive",
        "timeline",
        "gradient",
        "keys",
        "resources",
    ]
    assert registry.get_experiment("timeline").name == "timeline"
    with pytest.raises(AdabatchError, match="unknown experiment 'nope': allowed all"):
        registry.get_experiment("nope")
    for name in registry.names():
        assert name in registry.available()


QUICK_BUDGET_S = 130.0  # stream seconds of one --quick experiment (follow-ups estimated)
QUICK_TOTAL_BUDGET_S = 780.0  # those CI runs on real Spark (ci_quick.py)


def quick_stream_s(name: str) -> float:
    """Planned stream seconds of ``name --quick``: its configs, and each follow-up as long
    as the longest config."""
    exp = registry.get_experiment(name)
    settings = Settings(Path("/tmp/unused"), quick=True)
    configs = exp.configs(settings)
    longest = max(c.duration_s for c in configs)
    return sum(c.duration_s for c in configs) + longest * exp.planned_followups(settings)


@pytest.mark.parametrize("name", registry.names())
def test_quick_versions_stay_within_the_ci_budget(name: str) -> None:
    configs = registry.get_experiment(name).configs(Settings(Path("/tmp/unused"), quick=True))
    assert all(c.duration_s > 0 for c in configs)
    assert quick_stream_s(name) <= QUICK_BUDGET_S
    names = [c.name for c in configs]
    assert len(names) == len(set(names))


def test_all_quick_versions_together_stay_within_the_ci_budget() -> None:
    in_ci = [n for n in registry.names() if n not in NOT_IN_CI]
    assert sum(quick_stream_s(n) for n in in_ci) <= QUICK_TOTAL_BUDGET_S


@pytest.mark.parametrize("name", registry.names())
def test_every_full_experiment_includes_sparks_default_trigger(name: str) -> None:
    exp = registry.get_experiment(name)
    settings = Settings(Path("/tmp/unused"), quick=False)
    if exp.planned_followups(settings):
        pytest.skip("its Spark baselines are follow-ups chosen from the first runs")
    assert "spark-default" in {c.role for c in exp.configs(settings)}


def test_full_static_vs_adaptive_covers_every_workload_rate_and_baseline() -> None:
    configs = registry.get_experiment("static-vs-adaptive").configs(Settings(Path("/tmp/u")))
    groups = {c.group for c in configs}
    assert len(groups) == 8
    for g in groups:
        mine = [c for c in configs if c.group == g]
        assert {c.role for c in mine} == {"static", "adaptive", "spark-default", "trigger"}
        assert {c.controller for c in mine} >= {"fixed-point", "isotonic", "pid", "adcom"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "nope", "--out", "X"], "unknown experiment 'nope'"),
        (
            ["bench", "timeline", "--out", "X", "--seed", "-1"],
            "--seed '-1': allowed an integer >= 0",
        ),
        (["bench", "timeline", "--out", "X", "--force", "--resume"], "exclude each other"),
        (
            ["bench", "timeline", "--out", "X", "--only", "nope-*"],
            "--only 'nope-*' matches no config of timeline: allowed a shell pattern of its",
        ),
        (["bench", "all", "--out", "X", "--only", "a*"], "allowed with one, not all"),
    ],
)
def test_cli_bad_input_is_one_line(argv: list[str], message: str, capsys, tmp_path) -> None:
    argv = [a if a != "X" else str(tmp_path / "o") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("adabatch: error: ") and message in err and err.count("\n") == 1


def test_static_vs_adaptive_headline_is_judged_where_the_small_interval_diverged() -> None:
    from adabatch.bench.experiments.static_vs_adaptive import verdicts_for

    def group(g: str, small_stable: bool, fp_stable: bool) -> list[Outcome]:
        return [
            outcome(f"{g}-s", "static", 0.5, 1, stable=small_stable, group=g, interval=0.25),
            outcome(f"{g}-s2", "static", 2.5, 1, group=g, interval=2.0),
            outcome(f"{g}-fp", "fixed-point", 0.6, 1, stable=fp_stable, group=g),
        ]

    def headline(*groups: list[Outcome]) -> Verdict:
        outs = [o for g in groups for o in g]
        names = list(dict.fromkeys(o.config.group for o in outs))
        return next(v for v in verdicts_for(outs, names) if v.headline)

    # a fast machine: the small interval held in one group; the other decides
    v = headline(group("a", True, True), group("b", False, True))
    assert v.holds and "diverged in 1 of 2" in v.evidence and "(b)" in v.evidence
    assert not headline(group("a", True, True), group("b", False, False)).holds
    # no static interval diverged: nothing shown, the claim fails
    assert not headline(group("a", True, True)).holds


def test_results_page_refuses_a_results_dir_it_did_not_make(tmp_path: Path) -> None:
    result = _result(tmp_path, [outcome("s", "static", 2.0, 80)], (Verdict("ok", True),))
    docs = tmp_path / "docs"
    (docs / "results").mkdir(parents=True)
    (docs / "results" / "notes.md").write_text("the user's\n")
    with pytest.raises(AdabatchError, match="not created by adabatch"):
        report.write_results_page([result], docs, command="adabatch bench all", facts={})
    assert (docs / "results" / "notes.md").read_text() == "the user's\n"
    assert not (docs / "results.md").exists()
    (docs / "results" / "notes.md").unlink()
    (docs / "results").rmdir()
    report.write_results_page([result], docs, command="adabatch bench all", facts={})
    report.write_results_page([result], docs, command="adabatch bench all", facts={})  # ours
    assert (docs / "results" / ".adabatch").is_file()
    assert (docs / "results" / "tiny" / "summaries.csv").is_file()


def test_the_upfront_check_marks_the_run_directories_it_creates(tmp_path: Path) -> None:
    """The check opens every run's database in its run directory before the first run; a
    ``--resume`` of a bench interrupted before a config started must be able to clear it,
    and a finished run it reuses stays as it was."""
    from adabatch.bench import runner
    from adabatch.outputs import is_marked, remove_tree

    exp = registry.get_experiment("static-vs-adaptive")
    settings = Settings(tmp_path, quick=True)
    configs = list(exp.configs(settings))
    exp_dir = tmp_path / exp.name
    foreign = exp_dir / configs[1].name
    foreign.mkdir(parents=True)
    done = exp_dir / configs[2].name  # a finished run that --resume reuses
    done.mkdir()
    (done / "config.json").write_text(json.dumps(runner._config_dict(configs[2], "generator")))
    (done / "summary.json").write_text("{}")
    runner.check_inputs(configs, exp_dir, settings, "generator", resume=True)
    first = exp_dir / configs[0].name
    assert (first / "results.sqlite").is_file() and is_marked(first)
    assert remove_tree(first, inside=exp_dir)  # what --resume does to rerun it
    assert not is_marked(foreign)  # a directory that was there is not claimed
    assert not (done / "results.sqlite").exists()  # nor is a finished run touched
    runner.check_inputs(configs[2:], exp_dir, settings, "generator", resume=False)
    assert (done / "results.sqlite").is_file()  # not reused: checked like the others


def test_progress_eta_is_paced_by_the_stream_run_here_not_the_reused_runs() -> None:
    """Eleven runs reused by --resume cost no wall time: after 100 s of stream in about
    100 s, 800 s of stream are left, about 13 minutes (not the 1 minute the share of the
    whole stream would suggest)."""
    import io
    import time

    from adabatch.bench.runner import _Bar
    from adabatch.report.progress import ProgressLine

    out = io.StringIO()
    bar = _Bar("dybbs", enabled=True)
    bar.line = ProgressLine(out, every_s=0.0)
    bar.started = time.monotonic() - 100.0
    for _ in range(11):
        bar.finish_config(100.0, reused=True)
    bar.set(done=11, total=20, current="[12/20] x", total_s=2000.0, at_s=100.0)
    assert "60% of the stream" in out.getvalue()
    assert "ETA 13.3 min" in out.getvalue()


def test_who_wins_compares_the_default_with_fixed_point_as_a_user_runs_it(
    tmp_path: Path,
) -> None:
    """Where fixed-point ran with a paper's parameters too (dybbs: a fixed 100 ms block
    interval), Spark's default is set against the run with fixed-point's own defaults."""
    import dataclasses

    tuned = outcome("fp-100ms", "fixed-point", 3.5, 16)
    tuned = dataclasses.replace(
        tuned, config=dataclasses.replace(tuned.config, params={"block_interval": 0.1})
    )
    outs = (tuned, outcome("fp", "fixed-point", 1.2, 17), outcome("sd", "spark-default", 0.7, 20))
    result = _result(tmp_path, list(outs), ())
    rows = report.default_vs_adaptive_table([result]).rows
    assert [(r[2], r[3]) for r in rows] == [("fixed-point", "0.70 / 1.20")]


def test_only_selects_the_configs_a_shell_pattern_matches(tmp_path: Path) -> None:
    from adabatch.bench.experiments import slo_scenarios

    configs = slo_scenarios.all_configs(model.Settings(tmp_path, quick=False))
    reduce = runner.select_configs("slo", configs, "reduce-*")
    assert reduce and [c for c in configs if c.workload == "reduce"] == reduce
    assert [c.name for c in runner.select_configs("slo", configs, "join-cpu-slo-2s")] == [
        "join-cpu-slo-2s"
    ]
