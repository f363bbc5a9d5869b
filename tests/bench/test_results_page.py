"""One experiment published into an existing results page: its parts replaced or added in
registry order, everything else byte for byte as it was, and sizes never mixed."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from adabatch.bench import page, report, runner
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
from adabatch.errors import AdabatchError
from adabatch.metrics import BatchRecord, summarize

REPO_DOCS = Path(__file__).resolve().parents[2] / "docs"


def _outcome(name: str, controller: str, latency: float) -> Outcome:
    rec = BatchRecord(batch_id=0, interval_s=1.0, blocks=2, records=100, processing_s=0.4,
                      queue_delay_s=0.0, cut_at=1.0, started_at=1.0, finished_at=1.4,
                      latency_s=1.4, record_latency_s=0.9, rate_rps=100.0)  # fmt: skip
    cfg = Config(name, workload="reduce", controller=controller, profile="constant:100",
                 duration_s=10, group="g")  # fmt: skip
    summary = summarize(
        (rec,), controller=controller, workload="reduce", profile="constant:100", duration_s=10
    ).with_values(stable=True, mean_latency_s=latency, cpu_s_per_million_records=9.0)
    return Outcome(cfg, summary, (rec,), Path("/nonexistent") / name)


def _result(tmp: Path, name: str, claim: str, holds: bool, *, quick: bool = False,
            fig: str = "f.png") -> ExperimentResult:  # fmt: skip
    exp = type("E", (Experiment,), {"name": name, "title": f"Title {name}", "paper": "p"})()
    exp_dir = tmp / "out" / name
    exp_dir.mkdir(parents=True, exist_ok=True)
    (exp_dir / fig).write_bytes(b"png " + claim.encode())
    outs = [
        _outcome(f"{name}-fp", "fixed-point", 1.0),
        _outcome(f"{name}-sd", "spark-default", 2.0),
    ]
    analysis = Analysis(
        figures=(Figure(exp_dir / fig, "a figure"),),
        shows=f"{name} shows {claim}.",
        verdicts=(Verdict(claim, holds, "", headline=True),),
    )
    settings = Settings(tmp / "out", quick=quick, seed=0, command=f"adabatch bench {name}")
    csv_path = report.write_summaries_csv(exp_dir / "summaries.csv", outs)
    return ExperimentResult(exp, settings, tuple(outs), analysis, exp_dir,
                            exp_dir / "section.md", csv_path, 60.0)  # fmt: skip


def test_one_experiment_replaced_and_one_added_in_registry_order(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    old = [
        _result(tmp_path / "a", "timeline", "timeline claim", True),
        _result(tmp_path / "a", "dybbs", "old dybbs claim", False, fig="old.png"),
        _result(tmp_path / "a", "pid", "pid claim", True),
    ]
    written = report.write_results_page(old, docs, command="adabatch bench all", facts={})
    before = written.read_text()
    assert "1 headline claim(s) did not hold" in before
    timeline_section = before[before.index("## Title timeline") : before.index("## Title dybbs")]

    new = _result(tmp_path / "b", "dybbs", "new dybbs claim", True)
    page.publish_experiment(new, docs, facts={"date": "2030-01-02"})
    text = written.read_text()
    assert "old dybbs claim" not in text and "- `dybbs`: new dybbs claim — holds." in text
    assert "did not hold" not in text  # the count is recomputed: nothing failed now
    assert timeline_section in text  # others byte for byte
    assert (
        text.index("## Title timeline") < text.index("## Title dybbs") < text.index("## Title pid")
    )
    assert text.count("## Title dybbs") == 1
    assert "`dybbs` (2030-01-02)" in text
    assert not (docs / "results" / "dybbs" / "old.png").exists()
    assert (docs / "results" / "dybbs" / "f.png").read_bytes() == b"png new dybbs claim"
    assert (docs / "results" / "pid" / "f.png").is_file()

    added = _result(tmp_path / "c", "keys", "keys claim", False)
    page.publish_experiment(added, docs, facts={"date": "2030-01-03"})
    text = written.read_text()
    assert (
        text.index("## Title timeline") < text.index("## Title keys") < text.index("## Title dybbs")
    )
    bullets = [x for x in text.split("\n") if x.startswith("- `")]
    assert [b.split("`")[1] for b in bullets] == ["timeline", "keys", "dybbs", "pid"]
    rows = [
        x.split("|")[1].strip() for x in text.split("\n") if x.startswith("| ") and "-sd" not in x
    ]
    assert [r for r in rows if r != "experiment"] == ["timeline", "keys", "dybbs", "pid"]
    assert "1 headline claim(s) did not hold" in text
    assert "`keys` (2030-01-03); `dybbs` (2030-01-02)." in text

    again = written.read_text()
    page.publish_experiment(added, docs, facts={"date": "2030-01-03"})
    assert written.read_text() == again  # publishing the same result twice changes nothing


def test_sizes_are_never_mixed(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    full = _result(tmp_path, "dybbs", "c", True)
    report.write_results_page([full], docs, command="adabatch bench all", facts={})
    quick = _result(tmp_path / "q", "dybbs", "c", True, quick=True)
    with pytest.raises(AdabatchError, match="--quick run and the page holds full runs"):
        page.publish_experiment(quick, docs, facts={})


def test_notes_kept_with_the_runs_are_published_with_the_section(tmp_path: Path) -> None:
    result = _result(tmp_path, "slo", "c", True)
    bare = runner.with_kept_notes(result.analysis, result.dir)
    assert bare == result.analysis  # no notes.md: nothing added
    said = "The first run was done twice: 1.20x, then 1.02x."
    (result.dir / runner.NOTES_FILE).write_text(said + "\n")
    analysis = runner.with_kept_notes(result.analysis, result.dir)
    noted = dataclasses.replace(result, analysis=analysis)
    text = page.publish_experiment(noted, tmp_path / "docs", facts={}).read_text()
    assert "**Kept with these runs** (`slo/notes.md`):" in text
    assert said in text


def test_a_new_page_holds_the_one_experiment(tmp_path: Path) -> None:
    docs = tmp_path / "fresh"
    written = page.publish_experiment(_result(tmp_path, "pid", "c", True), docs, facts={})
    assert "## Title pid (`pid`)" in written.read_text()


def test_the_repository_page_keeps_every_other_section(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(REPO_DOCS, docs, ignore=shutil.ignore_patterns("deadline*"))
    before = (docs / "results.md").read_text()
    start = before.index("## What reading through adabatch costs")
    overhead = before[start:]
    # the preamble up to the list of sections regenerated alone, which gains dybbs
    head = before[: before.index("## Headlines")].split(page.SPLICED)[0].rstrip("\n")
    page.publish_experiment(
        _result(tmp_path, "dybbs", "spliced", True), docs, facts={"date": "2030-01-02"}
    )
    text = (docs / "results.md").read_text()
    assert text.endswith(overhead) and text.startswith(head)
    spliced = next(line for line in text.splitlines() if line.startswith(page.SPLICED))
    assert "`dybbs` (2030-01-02)" in spliced
    assert "spliced" in text and "reduce-markov: isotonic has a lower latency" not in text
    assert text.count("(`dybbs`)") == 1
    for other in ("static-vs-adaptive", "calibrate", "pid"):
        assert f"(`{other}`)" in text
