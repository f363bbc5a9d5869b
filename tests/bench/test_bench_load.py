"""The background load of the ``resources`` experiment: real busy processes outside our
process tree, on and off by stream time, gone after stop and after their owner dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adabatch.bench.experiments.load import BackgroundLoad, LoadSchedule, LoadWindow, _start_time
from adabatch.errors import AdabatchError
from adabatch.runs import cpu

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def gone(pids: list[int], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_start_time(p) is None for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_workers_burn_cpu_outside_our_tree_and_stop() -> None:
    load = BackgroundLoad(2)
    load.start()
    try:
        pids = load.pids
        assert len(pids) == 2 and load.running
        tree = {p.pid for p in cpu.snapshot().processes}
        assert not tree & set(pids)  # not charged to Spark's run
        before = [cpu_s(p) for p in pids]
        time.sleep(1.5)
        used = [cpu_s(p) - b for p, b in zip(pids, before, strict=True)]
        assert all(u > 0.1 for u in used), used  # spinning, even on a shared machine
    finally:
        load.stop()
    assert not load.running and gone(pids)
    load.stop()  # idempotent


def test_workers_exit_when_their_owner_is_killed() -> None:
    script = textwrap.dedent(
        """
        from adabatch.bench.experiments.load import BackgroundLoad
        import sys, time
        load = BackgroundLoad(1)
        load.start()
        print(load.pids[0], flush=True)
        time.sleep(600)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(owner.stdout.readline())
        assert _start_time(pid) is not None
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        assert gone([pid]), "a worker outlived its owner"
    finally:
        if owner.poll() is None:
            owner.kill()


def test_schedule_follows_stream_time_and_records_spans() -> None:
    sched = LoadSchedule([LoadWindow(1.0, 2.0, 1)])
    sched.update(0.5)
    assert sched._load is None
    sched.update(1.1)
    pids = sched._load.pids
    assert sched._load.running
    sched.update(1.5)  # same window: no restart
    assert sched._load.pids == pids
    sched.update(2.0)
    assert sched._load is None and gone(pids)
    assert sched.events == [(1.1, "on", 1), (2.0, "off", 1)]
    assert sched.spans(10.0) == [(1.1, 2.0)]
    sched.update(1.2)
    sched.close()
    assert not sched._load  # stopped; the span still open at close ends at the run's end
    assert sched.spans(10.0) == [(1.1, 2.0), (1.2, 10.0)]


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_bad_worker_counts(workers: object) -> None:
    with pytest.raises(AdabatchError, match="workers"):
        BackgroundLoad(workers)  # type: ignore[arg-type]


def test_bad_windows() -> None:
    with pytest.raises(AdabatchError, match="need 0 <= start < end"):
        LoadWindow(5.0, 5.0, 1)
