"""Rate profiles: shapes, exact cumulative/inverse, and errors on malformed specs."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adabatch.errors import AdabatchError
from adabatch.profiles import parse_duration, parse_profile

SPECS = [
    "constant:1000",
    "step:1000:3000:60s",
    "steps:1000@0,2000@60s,500@2m",
    "sine:1000:6000:60s",
    "sine:0:4000:10s",
    "markov:1000,3000,6000:30s:7",
    "bursts:1000:8000:60s:10s",
]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("500ms", 0.5), ("1.5m", 90.0), ("2h", 7200.0), (3, 3.0)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "-5", "5x", "1.5 fortnights", "inf", "nan"])
def test_parse_duration_rejects(text):
    with pytest.raises(AdabatchError, match="duration"):
        parse_duration(text)


def test_constant_and_step_closed_form():
    c = parse_profile("constant:1000")
    assert c.cumulative(12.5) == 12500.0
    assert c.arrival_time(12500.0) == 12.5
    s = parse_profile("step:1000:3000:60s")
    assert s.rate(59.999) == 1000.0
    assert s.rate(60.0) == 3000.0
    assert s.cumulative(90.0) == 60_000 + 90_000
    assert s.arrival_time(60_000 + 3_000) == pytest.approx(61.0)
    assert s.mean_rate(0.0, 120.0) == pytest.approx(2000.0)


def test_steps_general():
    p = parse_profile("steps:1000@0,2000@60s,500@2m")
    assert [p.rate(t) for t in (0, 59, 60, 119, 120, 1e6)] == [1000, 1000, 2000, 2000, 500, 500]
    assert p.cumulative(130.0) == 60_000 + 120_000 + 5_000


def test_sine_starts_at_mean_and_rises():
    p = parse_profile("sine:1000:6000:60s")
    assert p.rate(0.0) == pytest.approx(3500.0)
    assert p.rate(15.0) == pytest.approx(6000.0)
    assert p.rate(45.0) == pytest.approx(1000.0)
    # one full period delivers exactly mean * period
    assert p.cumulative(60.0) == pytest.approx(3500.0 * 60.0)
    assert p.cumulative(30.0) > 3500.0 * 30.0  # the first half-period is the high half


def test_markov_is_deterministic_and_switches_state_every_dwell():
    a = parse_profile("markov:1000,3000,6000:30s:7")
    b = parse_profile("markov:1000,3000,6000:30s:7")
    ta = [a.rate(15.0 + 30.0 * k) for k in range(40)]
    assert ta == [b.rate(15.0 + 30.0 * k) for k in range(40)]
    assert ta[0] == 1000.0  # starts in the first state
    assert all(x != y for x, y in itertools.pairwise(ta))  # always a different state
    assert set(ta) == {1000.0, 3000.0, 6000.0}
    other = parse_profile("markov:1000,3000,6000:30s:8")
    assert [other.rate(15.0 + 30.0 * k) for k in range(40)] != ta
    # the seed argument seeds a spec without its own seed
    c = parse_profile("markov:1000,3000,6000:30s", seed=7)
    assert [c.rate(15.0 + 30.0 * k) for k in range(40)] == ta


def test_markov_inverse_extends_lazily():
    p = parse_profile("markov:100,200:1s:3")
    n = 1e6  # far beyond anything queried so far
    t = p.arrival_time(n)
    assert p.cumulative(t) == pytest.approx(n, rel=1e-12)


def test_bursts():
    p = parse_profile("bursts:1000:8000:60s:10s")
    assert p.rate(30.0) == 1000.0
    assert p.rate(60.0) == 8000.0
    assert p.rate(69.9) == 8000.0
    assert p.rate(70.0) == 1000.0
    assert p.rate(125.0) == 8000.0
    assert p.cumulative(120.0) == pytest.approx(1000 * 110 + 8000 * 10)


@pytest.mark.parametrize("mode", ["step", "linear"])
def test_trace_modes(tmp_path, mode):
    path = tmp_path / "rates.csv"
    path.write_text("time_s,rate_rps\n0,1000\n10,3000\n20,3000\n", encoding="utf-8")
    p = parse_profile(f"trace:rates.csv:{mode}", base_dir=tmp_path)
    if mode == "step":
        assert p.rate(5.0) == 1000.0
        assert p.cumulative(20.0) == 10_000 + 30_000
    else:
        assert p.rate(5.0) == 2000.0
        assert p.cumulative(20.0) == 20_000 + 30_000
    assert p.rate(100.0) == 3000.0  # the last rate holds
    assert p.arrival_time(p.cumulative(7.3)) == pytest.approx(7.3)


def test_trace_default_is_step(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("time_s,rate_rps\n0,10\n1,30\n", encoding="utf-8")
    assert parse_profile(f"trace:{path}").rate(0.5) == 10.0


def test_trace_zero_tail_never_reaches():
    p = parse_profile("steps:10@0,0@1")
    assert p.cumulative(100.0) == 10.0
    assert math.isinf(p.arrival_time(11.0))


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("nonsense", "malformed"),
        ("wave:1:2", "unknown shape 'wave'"),
        ("constant:0", "> 0"),
        ("constant:-3", "'-3'"),
        ("constant:abc", "'abc' is not a number"),
        ("step:1:2", "step:R1:R2:AT"),
        ("step:1:2:soon", "'soon' is not a duration"),
        ("steps:1@5,2@10", "first step must be at 0"),
        ("steps:1@0,2@10,3@10", "increase strictly"),
        ("steps:1@0,2", "RATE@TIME"),
        ("sine:5:1:10", "MIN 5 must be <= MAX 1"),
        ("sine:1:5:0", "PERIOD '0' is not allowed: allowed 1 ms"),
        ("markov:1000:10s", "at least two states"),
        ("markov:1,2:10s:x", "SEED 'x'"),
        ("bursts:1:2:10:10", "LENGTH 10 must be shorter"),
        ("trace:/no/such/file.csv", "does not exist"),
        ("trace:", "needs a file path"),
    ],
)
def test_malformed_specs_name_the_bad_part(spec, needle):
    with pytest.raises(AdabatchError) as err:
        parse_profile(spec)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_trace_bad_contents(tmp_path):
    bad_header = tmp_path / "h.csv"
    bad_header.write_text("t,r\n0,1\n", encoding="utf-8")
    with pytest.raises(AdabatchError, match="time_s,rate_rps"):
        parse_profile(f"trace:{bad_header}")
    bad_order = tmp_path / "o.csv"
    bad_order.write_text("time_s,rate_rps\n0,1\n5,1\n5,2\n", encoding="utf-8")
    with pytest.raises(AdabatchError, match="line 4"):
        parse_profile(f"trace:{bad_order}")
    bad_start = tmp_path / "s.csv"
    bad_start.write_text("time_s,rate_rps\n1,1\n", encoding="utf-8")
    with pytest.raises(AdabatchError, match="first time_s must be 0"):
        parse_profile(f"trace:{bad_start}")


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=200, deadline=None)
@given(n=st.floats(min_value=1e-3, max_value=5e7, allow_nan=False))
def test_arrival_time_inverts_cumulative(spec, n):
    p = parse_profile(spec)
    t = p.arrival_time(n)
    assert t >= 0
    assert p.cumulative(t) == pytest.approx(n, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=200, deadline=None)
@given(
    t0=st.floats(min_value=0, max_value=1e4, allow_nan=False),
    dt=st.floats(min_value=0, max_value=1e3, allow_nan=False),
)
def test_cumulative_is_monotone_and_matches_arrival(spec, t0, dt):
    p = parse_profile(spec)
    c0, c1 = p.cumulative(t0), p.cumulative(t0 + dt)
    assert c1 >= c0 - 1e-9 * max(c1, 1.0)
    if c0 > 0:
        # the first time the count reaches c0 is not after t0
        assert p.arrival_time(c0) <= t0 + 1e-9 * max(t0, 1.0)


@pytest.mark.parametrize("spec", SPECS)
def test_cumulative_matches_numeric_integral_of_rate(spec):
    p = parse_profile(spec)
    t1 = 137.0
    steps = 137_000
    h = t1 / steps
    integral = sum(p.rate((i + 0.5) * h) for i in range(steps)) * h
    assert p.cumulative(t1) == pytest.approx(integral, rel=2e-3)


@pytest.mark.parametrize("spec", SPECS)
def test_an_hour_of_batch_boundaries_round_trips(spec):
    # how fast is benchmarks/sim_speed.py's figure; here, arrival_time inverts cumulative
    p = parse_profile(spec)
    for i in range(0, 36_000, 7):
        t = i * 0.1 + 0.05
        if p.rate(t) > 0:
            assert p.arrival_time(p.cumulative(t)) == pytest.approx(t, abs=1e-6)
