"""Hostile input for every option and spec field of simulate, pid-sweep and deadline
plan/simulate/generate: exit 0 or 2, one line, no traceback, nothing touched outside the
named output (see harness.py for what is checked and how cases run).

``FUZZ_EXAMPLES`` scales the number of Hypothesis examples per command (each example is a
batch of 1-8 cases); the generation is derandomized, so CI sees the same cases each run.
``benchmarks/fuzz.py`` is the longer, randomized profile.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cases import BUILDERS
from harness import (
    MEM_BYTES,
    Case,
    ForkServer,
    Outcome,
    check,
    fuzz_base,
    limits,
    make_root,
    run_batch,
    snapshot,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "90"))
BATCH = 8
# Shrinking reruns a failing batch many times; the report already names each failing case.
PHASES = [Phase.explicit, Phase.generate] + (
    [Phase.shrink] if os.environ.get("FUZZ_SHRINK") else []
)


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer(jobs=2) as fork_server:
        yield fork_server


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    where = fuzz_base()
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.mark.parametrize("command", list(BUILDERS))
def test_hostile_input_meets_the_promises(command: str, server: ForkServer, base: Path) -> None:
    @settings(
        derandomize=True,
        deadline=None,
        phases=PHASES,
        max_examples=EXAMPLES,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(BUILDERS[command](), min_size=1, max_size=BATCH))
    def batch(cases: list[Case]) -> None:
        broken = [r for r in run_batch(server, cases, base) if r.failures]
        assert not broken, "\n\n".join(r.report() for r in broken[:3])

    batch()


# ---------------------------------------------------------------- the harness itself

LEGAL = Case(
    "simulate",
    ["simulate", "--workload=reduce", "--controller=static", "--profile=constant:500",
     "--duration=20s", "--out=out"],
    out="out",
    out_kind="dir",
)  # fmt: skip
REFUSED = Case(
    "simulate",
    ["simulate", "--workload=reduce", "--controller=static", "--profile=constant:500",
     "--duration=-5s", "--out=out"],
    out="out",
    out_kind="dir",
)  # fmt: skip


def test_fork_server_and_subprocess_agree(server: ForkServer, base: Path) -> None:
    """The fork server runs a case as the installed console script would."""
    for case in (LEGAL, REFUSED):
        forked = run_batch(server, [case], base)[0]
        spawned = run_batch(None, [case], base)[0]
        assert forked.outcome.status == spawned.outcome.status
        assert forked.outcome.stderr == spawned.outcome.stderr
        assert [f.klass for f in forked.failures] == [f.klass for f in spawned.failures]
    assert run_batch(server, [REFUSED], base)[0].outcome.status == 2


def test_check_sees_a_write_through_a_planted_symlink(base: Path) -> None:
    prior = Case("simulate", [*LEGAL.argv[:-1], "--out=prior"], out="prior", out_kind="dir")
    root = make_root(base, prior)
    before = snapshot(root)
    (root / "victim.txt").write_text("overwritten")  # what following prior/summary.json does
    (root / "work/prior/notes.txt").unlink()  # a user's file inside the output directory
    (root / "work/prior/summary.json").unlink()  # a planted link: adabatch may replace it
    ok = Outcome(status=0, signal=None, timed_out=False, stdout="", stderr="", wall_s=0)
    failures = check(prior, root, before, ok)
    text = " ".join(f.detail for f in failures)
    assert "victim.txt changed" in text
    assert "prior/notes.txt removed" in text
    assert "prior/summary.json" not in text


def test_check_sees_tracebacks_usage_text_and_kills(base: Path) -> None:
    root = make_root(base, REFUSED)
    before = snapshot(root)

    def classes(status: int | None, stderr: str, sig: int | None = None) -> list[str]:
        outcome = Outcome(status, sig, False, "", stderr, 0)
        return [f.klass for f in check(REFUSED, root, before, outcome)]

    assert classes(2, "adabatch: error: --duration '-5s' must be >= 0\n") == []
    assert classes(1, "Traceback (most recent call last):\nOverflowError: x\n") == ["traceback"]
    assert classes(2, "usage: adabatch\nadabatch: error: argument --x\n") == ["usage-text"]
    assert classes(2, "adabatch: error: a\nsecond line\n") == ["not-one-line"]
    assert classes(None, "", 9) == ["signal SIGKILL"]


def test_limits_stop_a_runaway() -> None:
    """The limits every case runs under stop an allocation past the address-space limit."""
    proc = subprocess.run(
        [sys.executable, "-c", f"bytearray({MEM_BYTES})"],
        preexec_fn=limits,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "MemoryError" in proc.stderr
