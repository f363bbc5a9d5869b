"""Output directories: adabatch writes only inside the directory named, deletes only what
it marked, one writer at a time, and leaves whole runs or an INCOMPLETE marker."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from adabatch.cli import main
from adabatch.errors import AdabatchError
from adabatch.outputs import (
    INCOMPLETE,
    MARKER,
    clean_json,
    mark_dir,
    open_output,
    remove_tree,
    summary_json,
)
from adabatch.runs.simulated import RUN_FILES, make_scenario, simulate, write_run

ADABATCH = Path(sys.executable).parent / "adabatch"
SIM = ["simulate", "--workload", "reduce", "--controller", "static", "--param", "interval=1"]
SIM += ["--profile", "constant:5000", "--duration", "60s"]


def cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ADABATCH), *argv], capture_output=True, text=True, cwd=cwd, check=False
    )


def one_line_error(proc: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("adabatch: error: "), proc.stderr
    for part in parts:
        assert part in lines[0]


def test_planted_symlink_is_replaced_never_written_through(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert main([*SIM, "--out", str(out)]) == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    for name in ("summary.json", "metrics.jsonl", "timeline.png"):
        (out / name).unlink()
        (out / name).symlink_to(Path("..") / "victim.txt")
    assert main([*SIM, "--out", str(out)]) == 0
    assert victim.read_text() == "keep me\n"
    for name in ("summary.json", "metrics.jsonl", "timeline.png"):
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    assert json.loads((out / "summary.json").read_text())["controller"] == "static"


def test_symlinked_subdirectory_is_not_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with open_output(tmp_path / "o") as od:
        (od.root / "sub").symlink_to(elsewhere)
        with pytest.raises(AdabatchError, match="symlink"):
            od.write_text("sub/x.json", "{}")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("bad", ["", "a-file", "a-file/below", "/proc/adabatch-x"])
def test_bad_out_is_one_line(tmp_path: Path, bad: str) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    proc = cli(*SIM, "--out", bad, cwd=tmp_path)
    one_line_error(proc, "--out")
    assert (tmp_path / "a-file").read_text() == "not a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing written


def test_unmarked_directory_with_our_file_names_is_refused(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("the user's own\n")
    proc = cli(*SIM, "--out", str(tmp_path))
    one_line_error(proc, "summary.json", "not written by adabatch")
    assert (tmp_path / "summary.json").read_text() == "the user's own\n"


def test_second_writer_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "o"
    with open_output(out):
        proc = cli(*SIM, "--out", str(out))
    one_line_error(proc, "in use by another adabatch run")
    assert not (out / "summary.json").exists()
    assert cli(*SIM, "--out", str(out)).returncode == 0  # the lock went with the holder


def test_rerun_removes_a_stale_sweep(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert main([*SIM, "--out", str(out), "--sweep-static", "--intervals", "1,2"]) == 0
    assert (out / "sweep.json").is_file()
    assert main([*SIM, "--out", str(out)]) == 0
    assert not (out / "sweep.json").exists()
    assert not (out / INCOMPLETE).exists()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MARKER, "metrics.jsonl", "summary.json", "timeline.png"]
    )


def test_failure_while_writing_leaves_incomplete_and_no_earlier_files(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert main([*SIM, "--out", str(out), "--sweep-static", "--intervals", "1,2"]) == 0
    result = simulate(make_scenario("reduce", "constant:5000", "30s"), "static")
    with open_output(out, replaces=RUN_FILES) as od:
        od.begin()
        od.write_text("metrics.jsonl", "{}\n")
        with pytest.raises(OSError), od.open_write("timeline.png") as fh:
            fh.write(b"half a png")
            raise OSError("disk full")
    assert (out / INCOMPLETE).is_file()
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, INCOMPLETE, "metrics.jsonl"])
    write_run(out, result)  # a whole run clears the marker
    assert not (out / INCOMPLETE).exists() and (out / "summary.json").is_file()


def test_interrupted_simulate_is_whole_or_marked(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert main([*SIM, "--out", str(out), "--sweep-static", "--intervals", "1,2"]) == 0
    earlier = json.loads((out / "summary.json").read_text())
    argv = [str(ADABATCH), *SIM[:-2], "--duration", "4h", "--out", str(out)]
    argv[argv.index("interval=1")] = "interval=0.2"
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and not (out / INCOMPLETE).exists():
        pass  # wait for the write phase: the run has started replacing the files
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    names = {p.name for p in out.iterdir()}
    assert "sweep.json" not in names  # the earlier run's extra file is gone either way
    if INCOMPLETE in names:  # interrupted while writing
        assert proc.returncode == 130 and "interrupted" in err
        assert "summary.json" not in names
    else:  # it finished before the signal arrived: a whole new run
        summary = json.loads((out / "summary.json").read_text())
        assert summary["requested_duration_s"] == 4 * 3600 != earlier["requested_duration_s"]


def test_json_outputs_have_no_infinity_and_the_summary_notes_them(tmp_path: Path) -> None:
    result = simulate(make_scenario("reduce", "constant:5000", "30s"), "static")
    records = tuple(
        replace(r, controller_state={"gain": math.inf, "rate": -math.inf, "ok": 1.0})
        for r in result.records
    )
    summary = result.summary.with_values(mean_latency_s=math.inf, model={"sigma": math.nan})
    paths = write_run(tmp_path / "o", type(result)(records, summary))
    for p in (paths["metrics"], paths["summary"]):
        text = p.read_text()
        assert "Infinity" not in text and "NaN" not in text
    line = json.loads(paths["metrics"].read_text().splitlines()[0])
    assert line["controller_state"] == {"gain": None, "rate": None, "ok": 1.0}
    saved = json.loads(paths["summary"].read_text())
    assert saved["mean_latency_s"] is None and saved["controller"] == "static"
    assert {"mean_latency_s", "model.sigma"} <= set(saved["nonfinite_fields"])


def test_clean_json_paths_and_a_finite_summary_unchanged() -> None:
    value, bad = clean_json({"a": [1.0, math.nan], "b": {"c": -math.inf}, "d": "x"})
    assert value == {"a": [1.0, None], "b": {"c": None}, "d": "x"} and bad == ["a[1]", "b.c"]
    assert "nonfinite_fields" not in json.loads(summary_json({"x": 1.5, "y": None}))


def test_remove_tree_deletes_only_marked_directories_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    theirs = root / "staging"
    theirs.mkdir(parents=True)
    (theirs / "thesis.tex").write_text("years of work\n")
    with pytest.raises(AdabatchError, match="not created by adabatch"):
        remove_tree(theirs, inside=root)
    assert (theirs / "thesis.tex").is_file()
    outside = mark_dir(tmp_path / "outside")
    with pytest.raises(AdabatchError, match="not inside"):
        remove_tree(root / ".." / "outside", inside=root)
    with pytest.raises(AdabatchError, match="not inside"):
        remove_tree(root, inside=root)
    link = root / "link"
    link.symlink_to(outside)
    with pytest.raises(AdabatchError, match="symlink"):
        remove_tree(link, inside=root)
    assert outside.is_dir()
    ours = mark_dir(root / "ours")
    (ours / "x").write_text("1")
    assert remove_tree(ours, inside=root) and not ours.exists()
    assert not remove_tree(root / "never-made", inside=root)
    empty = root / "empty"  # a user's empty directory: nothing to clear, left in place
    empty.mkdir()
    assert not remove_tree(empty, inside=root) and empty.is_dir()


def test_tpch_landing_refuses_an_unmarked_staging_dir(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from adabatch.deadline.spark import tpch

    (tmp_path / "tables").mkdir()
    pq.write_table(pa.table({"o_orderkey": [1, 2]}), tmp_path / "tables" / "orders.parquet")
    lineitem = pa.table({"l_orderkey": [1, 2], "l_linenumber": [1, 1]})
    pq.write_table(lineitem, tmp_path / "tables" / "lineitem.parquet")
    (tmp_path / "staging").mkdir()
    (tmp_path / "staging" / "notes.txt").write_text("mine\n")
    with pytest.raises(AdabatchError, match="not created by adabatch"):
        tpch.build_landing(tmp_path, slots=2, rate=1.0)
    assert (tmp_path / "staging" / "notes.txt").read_text() == "mine\n"
    (tmp_path / "staging" / "notes.txt").unlink()
    (tmp_path / "staging").rmdir()
    manifest = tpch.build_landing(tmp_path, slots=2, rate=1.0)  # its own dirs: marked
    assert (tmp_path / "staging" / MARKER).is_file() and len(manifest.slots) == 2
    tpch.build_landing(tmp_path, slots=2, rate=2.0)  # and replaced on the next build


def test_deadline_publish_refuses_siblings_it_did_not_make(tmp_path: Path) -> None:
    from adabatch.bench.experiments.deadline import publish as _publish

    out, docs = tmp_path / "out", tmp_path / "docs"
    out.mkdir()
    docs.mkdir()
    report = out / "deadline.md"
    report.write_text("# report\n![f](figures/f.png)\n")
    (docs / "deadline-figures").mkdir()
    (docs / "deadline-figures" / "keep.png").write_text("theirs")
    with pytest.raises(AdabatchError, match="not created by adabatch"):
        _publish(report, [], out, docs / "deadline.md")
    assert (docs / "deadline-figures" / "keep.png").read_text() == "theirs"
    assert not (docs / "deadline.md").exists()
    (docs / "deadline-figures" / "keep.png").unlink()
    (docs / "deadline-figures").rmdir()
    _publish(report, [], out, docs / "deadline.md")
    assert (docs / "deadline-figures" / MARKER).is_file()
    assert "deadline-figures/f.png" in (docs / "deadline.md").read_text()
    _publish(report, [], out, docs / "deadline.md")  # ours now: replaced


@pytest.mark.parametrize("d", ["docs/results", "docs/deadline-figures", "docs/deadline-raw"])
def test_committed_docs_directories_carry_the_marker(d: str) -> None:
    root = Path(__file__).resolve().parents[1]
    assert (root / d / MARKER).is_file()


def test_deadline_generate_never_overwrites_without_force(tmp_path: Path) -> None:
    target = tmp_path / "s.yaml"
    assert cli("deadline", "generate", str(target), "--queries", "2").returncode == 0
    first = target.read_text()
    proc = cli("deadline", "generate", str(target), "--queries", "3")
    one_line_error(proc, "already exists", "--force")
    assert target.read_text() == first
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(victim)
    one_line_error(cli("deadline", "generate", str(link)), "already exists")
    assert cli("deadline", "generate", str(link), "--force").returncode == 0
    assert victim.read_text() == "keep me\n" and not link.is_symlink()
    one_line_error(cli("deadline", "generate", ""), "empty")
    one_line_error(cli("deadline", "generate", str(tmp_path)), "is a directory")


def test_marker_file_is_not_followed_when_planted(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (out / MARKER).symlink_to(victim)
    proc = cli(*SIM, "--out", str(out))
    one_line_error(proc, "--out")
    assert victim.read_text() == "keep me\n"
    assert os.path.islink(out / MARKER)
