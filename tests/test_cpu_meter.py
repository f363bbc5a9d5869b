"""CPU accounting from /proc and psutil: children reaped by their parent, children the
kernel reaps because their parent ignores SIGCHLD (as PySpark's worker daemon does), and
what a run's cost may claim: the CPU under a local master, "not measured" elsewhere."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adabatch.errors import AdabatchError
from adabatch.metrics import RunSummary, summarize
from adabatch.report.text import fmt_cost, summary_rows
from adabatch.runs import cpu
from adabatch.runs.compare import tabulate
from adabatch.runs.cpu import (
    CpuMeter,
    RunMeter,
    cost_summary,
    cpu_seconds,
    is_local_master,
    run_scope,
    snapshot,
)

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"
# a parent that ignores SIGCHLD: its burning child is reaped by the kernel, uncounted. The
# child idles after its burn, so a sample sees all of its CPU however late the sampler runs.
BURN_THEN_IDLE = BURN.format(s=0.8) + "time.sleep(1.0)\n"
IGNORING_PARENT = f"""
import signal, subprocess, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", {BURN_THEN_IDLE!r}])
time.sleep(30.0)  # outlive the child, which the kernel reaps
"""


def test_a_child_reaped_by_its_parent_is_counted_once():
    before = snapshot()
    child = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.6)])
    time.sleep(0.3)
    during = snapshot()
    assert child.pid in {p.pid for p in during.processes}
    child.wait()
    after = snapshot()
    assert 0.5 <= cpu_seconds(before, after) <= 1.5
    # the same through an intermediate snapshot: counted once, not twice
    assert 0.5 <= cpu_seconds(before, during) + cpu_seconds(during, after) <= 1.5


def test_the_meter_keeps_a_kernel_reaped_grandchild_that_two_snapshots_lose():
    # the parent is the meter's root, so our own CPU (the sampling itself) is not in it
    parent = subprocess.Popen([sys.executable, "-c", IGNORING_PARENT])
    try:
        meter = CpuMeter(root=parent.pid, interval_s=0.05)
        seen_child = False
        while parent.poll() is None:
            meter.sample()
            children = {p.pid for p in meter.last.processes} - {parent.pid}
            seen_child = seen_child or bool(children)
            if seen_child and not children:
                break  # the grandchild is gone; the parent still sleeps
            time.sleep(0.01)
        meter.sample(force=True)
        assert parent.poll() is None, "the parent must outlive the measurement"
    finally:
        parent.kill()
        parent.wait()
    assert seen_child
    # all of the grandchild's 0.8 s burn, seen while it idled; /proc counts user and system
    # time in whole ticks, each rounded down (0.79 s was seen on a loaded machine)
    assert meter.cpu_s >= 0.75
    end_to_end = cpu_seconds(meter.first, meter.last)
    assert 0.0 <= end_to_end < 0.3  # never negative, but the burn is lost


def test_cost_summary():
    assert cost_summary(2.0, 1_000_000, 4.0) == {
        "cpu_s": 2.0,
        "cpu_s_per_million_records": 2.0,
        "cpu_cores_used": 0.5,
    }
    assert cost_summary(1.0, 0, 0.0)["cpu_s_per_million_records"] is None
    assert set(cost_summary(None, 1000, 4.0).values()) == {None}


# A parent that starts two burning children, waits for them (so it reaps them), then idles
# so that a sample sees their whole CPU in its reaped-children time.
TWO_BURNERS = f"""
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", {BURN.format(s=0.5)!r}]) for _ in range(2)]
for k in kids:
    k.wait()
time.sleep(30.0)
"""


def test_psutil_and_proc_see_the_same_cpu_of_a_busy_tree():
    parent = subprocess.Popen([sys.executable, "-c", TWO_BURNERS])
    try:
        meters = [CpuMeter(root=parent.pid, interval_s=0.05, backend=b) for b in ("proc", "psutil")]
        assert [m.backend for m in meters] == ["proc", "psutil"]
        seen: set[int] = set()
        while parent.poll() is None:
            for m in meters:
                m.sample()
            children = {p.pid for p in meters[1].last.processes} - {parent.pid}
            seen |= children
            if len(seen) == 2 and not children:
                break  # both children are done and reaped; the parent idles
            time.sleep(0.02)
        for m in meters:
            m.sample(force=True)
        assert parent.poll() is None, "the parent must outlive the measurement"
    finally:
        parent.kill()
        parent.wait()
    proc_s, psutil_s = (m.cpu_s for m in meters)
    assert len(seen) == 2  # psutil found both children in the tree
    assert 0.95 <= proc_s <= 2.0 and 0.95 <= psutil_s <= 2.0
    assert abs(proc_s - psutil_s) <= 0.1


def test_a_psutil_snapshot_names_processes_and_their_start_times():
    import psutil

    code = BURN.format(s=0.3) + "print('burnt', flush=True)\ntime.sleep(5.0)\n"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "burnt\n"  # both backends see the same CPU time
        by_proc, by_psutil = snapshot(backend="proc"), snapshot(backend="psutil")
        created = psutil.Process(child.pid).create_time()
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    theirs = {p.pid: p for p in by_proc.processes}
    mine = {p.pid: p for p in by_psutil.processes}
    assert {os.getpid(), child.pid} <= set(mine) & set(theirs)
    assert mine[child.pid].ppid == os.getpid() and mine[child.pid].name == theirs[child.pid].name
    assert mine[child.pid].started == pytest.approx(created)
    assert mine[child.pid].own_s == pytest.approx(theirs[child.pid].own_s, abs=0.02)
    assert mine[child.pid].own_s >= 0.29


def test_backends_are_chosen_by_what_the_system_has(monkeypatch, tmp_path):
    assert cpu.default_backend() == "proc"  # Linux
    with pytest.raises(AdabatchError, match="CPU backend 'bogus' is not allowed"):
        snapshot(backend="bogus")
    # a system without /proc (macOS): psutil if installed, else nothing
    monkeypatch.setattr(cpu, "PROC", tmp_path / "no-proc")
    assert cpu.default_backend() == "psutil"
    assert snapshot().total_s > 0
    monkeypatch.setitem(sys.modules, "psutil", None)  # and without psutil
    assert cpu.default_backend() == "none"
    with pytest.raises(AdabatchError, match="neither: pip install psutil"):
        snapshot()
    with pytest.raises(AdabatchError, match="psutil, which is not installed"):
        snapshot(backend="psutil")
    meter = RunMeter("local[2]")
    meter.sample(force=True)
    cost = meter.cost(1000)
    assert cost["cpu_s"] is None and cost["cpu_measured"] is False
    assert cost["cpu_scope"] == "not measured: this system has neither /proc nor psutil"


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[4,3]", True),
        (" local[*] ", True),
        ("spark://127.0.0.1:7077", False),
        ("yarn", False),
        ("k8s://https://host:6443", False),
        ("local-cluster[2,1,1024]", False),
        ("mesos://host:5050", False),
        ("localhost", False),
    ],
)
def test_only_local_masters_run_the_executors_in_our_tree(master, local):
    assert is_local_master(master) is local


def test_a_cluster_run_reports_the_cpu_as_not_measured():
    meter = RunMeter("spark://user:secret@127.0.0.1:7077")
    time.sleep(0.05)
    meter.sample(force=True)
    assert meter.meter is None and meter.wall_s >= 0.05
    cost = meter.cost(10_000)
    assert cost["cpu_s"] is None
    assert cost["cpu_s_per_million_records"] is None and cost["cpu_cores_used"] is None
    assert cost["cpu_measured"] is False
    assert cost["cpu_scope"] == (
        "not measured: executors run outside this process (master spark://user:***@127.0.0.1:7077)"
    )
    assert run_scope(None).text.startswith("not measured: Spark runs outside this process")
    assert run_scope("local[2]", "psutil") == cpu.CpuScope(
        True, "driver process tree (local master, psutil)", "psutil"
    )


# A local-master meter in a process with a busy child named "java" (a stand-in for the JVM
# py4j starts: a symlink to Python, so its process name is "java"), and one without.
METER_SCRIPT = """
import json, subprocess, sys, time
from adabatch.runs.cpu import RunMeter
java, backend = sys.argv[1], sys.argv[2]
child = subprocess.Popen([java, "-c", "import time\\nt = time.process_time()\\n"
                          "while time.process_time() - t < 0.6: pass"]) if java != "-" else None
meter = RunMeter("local[2]", backend=backend, interval_s=0.05)
while child is not None and child.poll() is None:
    meter.sample()
    time.sleep(0.02)
meter.sample(force=True)
print(json.dumps(meter.cost(1_000_000)))
"""


@pytest.mark.parametrize("backend", ["proc", "psutil"])
def test_a_local_run_measures_its_tree_with_either_backend(tmp_path, backend):
    java = tmp_path / "java"
    java.symlink_to(Path(sys.executable).resolve())
    done = subprocess.run(
        [sys.executable, "-c", METER_SCRIPT, str(java), backend],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    cost = json.loads(done.stdout)
    assert cost["cpu_measured"] is True
    where = {"proc": "/proc", "psutil": "psutil"}[backend]
    assert cost["cpu_scope"] == f"driver process tree (local master, {where})"
    assert 0.55 <= cost["cpu_s"] <= 1.5
    assert cost["cpu_s_per_million_records"] == pytest.approx(cost["cpu_s"])
    assert cost["cpu_cores_used"] > 0
    assert cost["host_boot"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def test_a_local_master_whose_jvm_is_not_our_child_is_not_measured():
    done = subprocess.run(
        [sys.executable, "-c", METER_SCRIPT, "-", "auto"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    cost = json.loads(done.stdout)
    assert cost["cpu_s"] is None and cost["cpu_measured"] is False
    assert cost["cpu_scope"] == "not measured: the Spark JVM is not a child of this process"


def _spark_summary(**cost) -> RunSummary:
    base = summarize([], controller="x", workload="reduce", profile="constant:1", duration_s=1.0)
    return base.with_values(mode="spark", **cost)


def test_the_summary_table_says_not_measured_and_why():
    scope = "not measured: executors run outside this process (master spark://127.0.0.1:7077)"
    cost = {**cost_summary(None, 1000, 10.0), "cpu_measured": False, "cpu_scope": scope}
    # the same after summary.json is written and read back (None is null in the file)
    for s in (_spark_summary(**cost), RunSummary.from_json(_spark_summary(**cost).to_json())):
        rows = dict(summary_rows(s))
        assert rows["CPU s per million records"] == "not measured"
        assert rows["CPU cores used"] == "not measured"
        assert rows["CPU scope"] == scope
        assert fmt_cost(s, "cpu_s_per_million_records") == "not measured"
    measured = {**cost_summary(2.0, 1_000_000, 4.0), "cpu_measured": True, "cpu_scope": "tree"}
    rows = dict(summary_rows(_spark_summary(**measured)))
    assert rows["CPU s per million records"] == "2.0" and rows["CPU scope"] == "tree"
    # a measured run without records has no cost per record: missing, not "not measured"
    empty = {**cost_summary(2.0, 0, 4.0), "cpu_measured": True, "cpu_scope": "tree"}
    assert dict(summary_rows(_spark_summary(**empty)))["CPU s per million records"] == "-"


def test_compare_and_bench_cope_with_cpu_not_measured():
    from adabatch.bench.model import Config, Outcome
    from adabatch.bench.ratios import ratios
    from adabatch.bench.report import standard_table, winner

    scope = "not measured: executors run outside this process (master yarn)"
    off = {**cost_summary(None, 1000, 10.0), "cpu_measured": False, "cpu_scope": scope}
    runs = [
        _spark_summary(**off).with_values(stable=True, mean_latency_s=lat) for lat in (2.0, 1.0)
    ]
    table = tabulate(["a", "b"], runs)
    assert table.best == "b"
    assert all(math.isnan(r["cpu_s_per_million_records"]) for r in table.ratios)
    assert [r["cpu_s_per_million_records"] for r in table.rows()] == [None, None]
    assert table.cpu_note() == "CPU " + scope
    assert tabulate(["a"], [_spark_summary(cpu_measured=True)]).cpu_note() is None

    base = {"workload": "reduce", "profile": "constant:100", "duration_s": 10}
    sd = Outcome(Config("sd", controller="spark-default", **base), runs[0], (), Path("/x"))
    fp = Outcome(Config("fp", controller="fixed-point", **base), runs[1], (), Path("/x"))
    assert winner(sd, fp, "cpu_s_per_million_records") == "not measured"
    assert winner(sd, fp, "mean_latency_s") == "fixed-point"
    assert math.isnan(ratios(fp, [sd, fp])["cpu_to_default"])
    cells = dict(zip(*(lambda t: (t.columns, t.rows[0]))(standard_table([fp])), strict=True))
    assert cells["CPU s/M rec"] == "not measured" and cells["CPU vs spark-default"] == "-"
