"""The trigger guard's rules and its verdict files, without Spark (the Spark side is in
``test_trigger_guard.py``)."""

from __future__ import annotations

import os
import tempfile

import pytest

from adabatch.errors import AdabatchError
from adabatch.streaming.guard import (
    check,
    clear_verdict,
    options_key,
    refusal,
    verdict_dir,
    write_verdict,
)
from adabatch.streaming.options import parse_options

JVM_PID = 4_000_000_000 + os.getpid()  # no real process: the test's own directory


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def opts(**extra):
    return parse_options({"controller": "fixed-point", "profile": "constant:100", **extra})


def test_a_controller_refuses_processing_time_and_real_time_only():
    line = refusal(opts(), "ProcessingTimeTrigger", 2000)
    assert line == (
        "trigger processingTime='2000 ms' fights controller 'fixed-point', which cuts the "
        "batches itself: with a controller use the default trigger or availableNow; for "
        "processingTime use controller 'spark-default' or mode 'advise'"
    )
    assert "realTime='5000 ms'" in refusal(opts(), "RealTimeTrigger", 5000)
    assert refusal(opts(), "ProcessingTimeTrigger", 0) is None  # Spark's default trigger
    for kind in ("AvailableNowTrigger", "OneTimeTrigger", "ContinuousTrigger"):
        assert refusal(opts(), kind, 0) is None
    for allowed in (opts(controller="spark-default"), opts(mode="advise")):
        assert refusal(allowed, "ProcessingTimeTrigger", 2000) is None
        assert refusal(allowed, "RealTimeTrigger", 5000) is None


def test_a_verdict_fails_its_source_only_until_cleared():
    mine, other = opts(), opts(seed="7")
    assert options_key(mine) == options_key(opts()) != options_key(other)
    check(mine, jvm_pid=JVM_PID)  # no verdict: nothing happens
    write_verdict(JVM_PID, options_key(mine), "run-1", "trigger X fights controller Y")
    with pytest.raises(AdabatchError, match=r"^trigger X fights controller Y$"):
        check(mine, jvm_pid=JVM_PID)
    check(other, jvm_pid=JVM_PID)  # another source's options
    check(mine, jvm_pid=JVM_PID + 1)  # another driver's
    clear_verdict(JVM_PID, options_key(mine), "run-0")  # a later run's verdict stays
    with pytest.raises(AdabatchError):
        check(mine, jvm_pid=JVM_PID)
    clear_verdict(JVM_PID, options_key(mine), "run-1")
    check(mine, jvm_pid=JVM_PID)


def test_verdicts_live_in_a_private_directory_per_driver():
    write_verdict(JVM_PID, "k", "run", "no")
    folder = verdict_dir(JVM_PID)
    assert folder.is_dir() and folder.stat().st_mode & 0o077 == 0
    assert verdict_dir(JVM_PID + 1) != folder
    (folder / "bad.json").write_text("not json", encoding="utf-8")
    bad = opts()
    (folder / f"{options_key(bad)}.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(AdabatchError, match="not written by adabatch: delete it"):
        check(bad, jvm_pid=JVM_PID)
