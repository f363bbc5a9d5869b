"""CPU accounting from /proc: children reaped by their parent, and children the kernel
reaps because their parent ignores SIGCHLD (as PySpark's worker daemon does)."""

from __future__ import annotations

import subprocess
import sys
import time

from adabatch.runs.cpu import CpuMeter, cost_summary, cpu_seconds, snapshot

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
