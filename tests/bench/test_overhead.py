"""The ``overhead`` experiment without Spark: its configs and where each reads, the
runner's source precedence, the producer outside the CPU meter's tree with its exactly-once
check on real files (and a real Redis Stream), and the verdicts from outcomes.
Its --quick run on real Spark is in tests/bench/test_bench_quick.py."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adabatch.bench import registry, runner
from adabatch.bench.experiments import live_producer as lp
from adabatch.bench.experiments import overhead as ov
from adabatch.bench.model import Config, Outcome, Settings
from adabatch.errors import AdabatchError
from adabatch.metrics import summarize
from adabatch.runs import cpu
from adabatch.runs.produce import generator_totals, landed_totals, produce
from adabatch.runs.source_spec import parse_source

EXP = registry.get_experiment("overhead")


def configs(tmp_path: Path, quick: bool) -> dict[str, Config]:
    return {c.name: c for c in EXP.configs(Settings(tmp_path, quick=quick))}


def test_quick_and_full_configs_pair_each_run_with_its_reference(tmp_path: Path) -> None:
    quick = configs(tmp_path, True)
    assert list(quick) == ["static-1s", "trigger-1s", "files-static-1s", "redis-static-1s"]
    full = configs(tmp_path, False)
    assert list(full)[4:] == [
        "static-2s", "trigger-2s", "static-1s-r2", "trigger-1s-r2", "static-2s-r2",
        "trigger-2s-r2", "static-1s-r3", "trigger-1s-r3", "static-2s-r3", "trigger-2s-r3",
        "spark-default",
    ]  # fmt: skip
    assert full["static-1s-r3"].labels["reference"] == "trigger-1s-r3"
    for cs, seconds in ((quick, ov.QUICK_S), (full, ov.FULL_S)):
        assert {c.duration_s for c in cs.values()} == {seconds}
        assert {c.profile for c in cs.values()} == {ov.PROFILE}
        assert {c.workload for c in cs.values()} == {"reduce"}
    s2, t2 = full["static-2s"], full["trigger-2s"]
    assert s2.params == {"interval": 2.0, "blocks": 2} and s2.labels["reference"] == "trigger-2s"
    assert (t2.role, t2.trigger) == ("trigger", "processingTime:2s")
    assert ov.interval_of(s2) == ov.interval_of(t2) == 2.0
    files, red = quick["files-static-1s"], quick["redis-static-1s"]
    run_dir = (tmp_path / "overhead" / "files-static-1s").resolve()
    assert files.source == f"files:{run_dir / 'landing'}"
    spec = parse_source(red.source)
    assert spec.option("url") == "redis://127.0.0.1:6379/0"
    assert spec.option("stream").startswith("adabatch-bench-overhead-")
    other = configs(tmp_path / "elsewhere", True)["redis-static-1s"]
    assert other.source != red.source  # a stream of its own per output directory
    for live in (files, red):
        assert live.live and live.labels["reference"] == "static-1s"
        assert live.params == quick["static-1s"].params
    assert not quick["static-1s"].live and quick["static-1s"].source == "generator"
    full = EXP.session_warmup_s(Settings(tmp_path, quick=False))
    assert full == ov.FULL_WARMUP_S > ov.QUICK_WARMUP_S
    assert EXP.session_warmup_s(Settings(tmp_path, quick=True)) == ov.QUICK_WARMUP_S


def test_a_config_reads_its_own_live_source_and_refuses_a_bench_wide_one(tmp_path: Path) -> None:
    quick = configs(tmp_path, True)
    settings = Settings(tmp_path, seed=5)
    files = quick["files-static-1s"]
    cfg = runner._run_config(files, tmp_path / "f", settings, "generator")
    assert cfg.source == files.source and dict(cfg.source_options) == {}  # earliest: fresh
    assert runner._config_dict(files, "generator")["source"] == files.source
    gen = quick["static-1s"]
    assert runner._run_config(gen, tmp_path / "g", settings, "generator").source == "generator"
    assert "source" not in runner._config_dict(gen, "generator")  # earlier runs still match
    with pytest.raises(AdabatchError, match="chooses the source of each run itself") as err:
        runner.check_source(EXP, list(quick.values()), "redis://127.0.0.1:6379/0/x")
    assert "run it without --source" in str(err.value)
    runner.check_source(EXP, list(quick.values()), "generator")
    with pytest.raises(AdabatchError, match="config 'x': source 'kafka:t' is not allowed"):
        Config("x", workload="reduce", controller="static", profile="constant:1",
               duration_s=1, source="kafka:t")  # fmt: skip


def write_db(run_dir: Path, totals: dict[int, tuple[int, float]]) -> None:
    """A results database as reduce leaves it (per key: records, value sum)."""
    with sqlite3.connect(run_dir / "results.sqlite") as con:
        con.execute(
            f"CREATE TABLE {lp.TOTALS_TABLE} (run_id TEXT, key BIGINT, records BIGINT, "
            "value_sum DOUBLE PRECISION)"
        )
        con.executemany(
            f"INSERT INTO {lp.TOTALS_TABLE} VALUES ('r', ?, ?, ?)",
            [(k, n, s) for k, (n, s) in totals.items()],
        )


def wait_produced(spec, at_least: int) -> None:
    deadline = time.monotonic() + 60
    while lp.produced_so_far(spec) < at_least:
        assert time.monotonic() < deadline, "the producer wrote nothing within 60 s"
        time.sleep(0.1)  # polling a directory another process writes


def run_producer(tmp_path: Path, source: str) -> tuple[dict, Path]:
    """A LiveProducer over ``source`` as the bench runs it: outside our process tree
    while it writes, stopped and checked on close against a database holding exactly the
    generator's first records (what the producer writes in order)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = parse_source(source)
    hook = lp.LiveProducer(spec, run_dir, duration_s=2.0, seed=3, profile=ov.PROFILE)
    try:
        wait_produced(spec, 10_000)
        tree = {p.pid for p in cpu.snapshot().processes}
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                 stdin=subprocess.PIPE)  # fmt: skip
        try:
            assert child.pid in {p.pid for p in cpu.snapshot().processes}  # a child counts
        finally:
            child.communicate(b"")
        assert hook.pid not in tree and lp.proc_start(hook.pid) == hook.started
        hook.update(1.0)
        assert hook.produced_at_stop is None  # before the run's end nothing is noted
        hook.update(2.0)
        at_stop = hook.produced_at_stop
        assert at_stop is not None and at_stop >= 10_000
        write_db(run_dir, generator_totals(ov.PROFILE, at_stop - 7, seed=3))
    finally:
        hook.close()
    assert lp.proc_start(hook.pid) is None  # stopped and gone
    record = json.loads((run_dir / lp.PRODUCER_FILE).read_text())
    assert record["producer_ended"] == "stopped" and "check_error" not in record
    assert record["produced_at_stop"] == at_stop <= record["produced_total"]
    assert record["read"] == record["landed_prefix"] == at_stop - 7
    assert record["exactly_once"] is True and record["mismatched_keys"] == 0
    return record, run_dir


def test_the_producer_runs_outside_the_metered_tree_and_the_run_is_checked(tmp_path) -> None:
    _, run_dir = run_producer(tmp_path, f"files:{tmp_path / 'run' / 'landing'}")
    assert not (run_dir / "landing").exists()  # checked, then deleted


@pytest.mark.services
def test_the_producer_fills_a_fresh_redis_stream(tmp_path) -> None:
    import redis

    source = lp.live_source("redis", tmp_path / "run")
    client = redis.Redis.from_url(lp.REDIS_URL)
    stream = parse_source(source).option("stream")
    client.xadd(stream, {"key": "1", "value": "999"})  # a stale entry: cleared first
    try:
        run_producer(tmp_path, source)
        assert not client.exists(stream)  # checked, then deleted
    finally:
        client.delete(stream)
        client.close()


def test_a_wrong_or_short_database_fails_the_exactly_once_check(tmp_path: Path) -> None:
    spec = parse_source(f"files:{tmp_path / 'landing'}")
    written = produce(spec, ov.PROFILE, 1.0, seed=2).records
    assert lp.produced_so_far(spec) == written == sum(n for n, _ in landed_totals(spec).values())
    good = generator_totals(ov.PROFILE, 3000, seed=2)
    (tmp_path / "a").mkdir()
    write_db(tmp_path / "a", good)
    assert lp.exactly_once(tmp_path / "a", spec)["exactly_once"] is True
    bad = dict(good)
    key = next(iter(bad))
    bad[key] = (bad[key][0], bad[key][1] + 1.0)  # one value summed wrong
    (tmp_path / "b").mkdir()
    write_db(tmp_path / "b", bad)
    check = lp.exactly_once(tmp_path / "b", spec)
    assert check["exactly_once"] is False and check["mismatched_keys"] == 1
    (tmp_path / "c").mkdir()
    write_db(tmp_path / "c", generator_totals(ov.PROFILE, written + 10, seed=2))
    more = lp.exactly_once(tmp_path / "c", spec)  # read more than ever landed
    assert more["exactly_once"] is False and more["landed_prefix"] == written
    assert lp.exactly_once(tmp_path / "none", spec)["exactly_once"] is False  # no database


def outcome(config: Config, cpu_per_m: float, tmp_path: Path, *, stable: bool = True,
            producer: dict | None = None) -> Outcome:  # fmt: skip
    d = tmp_path / config.name
    d.mkdir(parents=True, exist_ok=True)
    if producer is not None:
        (d / lp.PRODUCER_FILE).write_text(json.dumps(producer))
    summary = summarize((), controller=config.controller, workload="reduce",
                        profile=ov.PROFILE, duration_s=config.duration_s).with_values(
        stable=stable, cpu_s_per_million_records=cpu_per_m, records=100_000,
    )  # fmt: skip
    return Outcome(config, summary, (), d)


def outcomes(tmp_path: Path, quick: bool, cpus: dict[str, float], share: float = 0.98):
    good = {"produced_at_stop": 100_000, "read": round(100_000 * share), "exactly_once": True}
    good["landed_prefix"] = good["read"]
    return [
        outcome(c, cpus.get(c.name, 200.0), tmp_path, producer=good if c.live else None)
        for c in configs(tmp_path, quick).values()
    ]


def verdicts(outs, quick: bool) -> dict[str, tuple[bool, bool]]:
    """Each verdict's first words -> (holds, headline)."""
    return {
        " ".join(v.claim.split()[:4]): (v.holds, v.headline)
        for v in ov.overhead_verdicts(outs, quick=quick)
    }


def test_full_verdicts_hold_the_bounds_as_measured(tmp_path: Path) -> None:
    ok = {"static-1s": 206.0, "trigger-1s": 200.0, "files-static-1s": 250.0}
    v = verdicts(outcomes(tmp_path, False, ok), quick=False)
    assert v["adabatch's static interval costs"] == (True, True)
    assert v["reading a landing directory"] == (True, True)
    assert v["every run stays stable"] == (True, False)
    once = verdicts(outcomes(tmp_path, False, {**ok, "static-2s": 240.0}), quick=False)
    assert once["adabatch's static interval costs"] == (True, True)  # one pair in three
    twice = {**ok, "static-2s": 207.0, "static-2s-r3": 207.0}
    over = verdicts(outcomes(tmp_path, False, twice), quick=False)
    assert over["adabatch's static interval costs"] == (False, True)  # median 1.035x at 2 s
    slow = verdicts(outcomes(tmp_path, False, {**ok, "redis-static-1s": 260.0}), quick=False)
    assert slow["reading a landing directory"] == (False, True)  # 1.26x of static-1s
    table = ov.cost_table(outcomes(tmp_path, False, ok))
    rows = {r[0]: dict(zip(table.columns, r, strict=True)) for r in table.rows}
    assert rows["static-1s"]["CPU vs reference"] == "1.03x"
    assert rows["files-static-1s"]["reference"] == "static-1s"
    assert rows["files-static-1s"]["read / produced"] == "98,000 / 100,000 (98.0%)"
    assert rows["trigger-2s"]["CPU vs reference"] == "-"
    assert rows["spark-default"]["interval (s)"] == "-"


def test_quick_verdicts_assert_stability_reading_and_finite_ratios(tmp_path: Path) -> None:
    noisy = {"static-1s": 400.0, "trigger-1s": 200.0}
    v = verdicts(outcomes(tmp_path, True, noisy), quick=True)
    assert v["adabatch's static interval costs"] == (False, False)  # reported, not asserted
    assert all(holds for holds, head in v.values() if head)
    assert v["each live run reads"] == (True, True)
    short = verdicts(outcomes(tmp_path / "s", True, {}, share=0.85), quick=True)
    assert short["each live run reads"] == (False, True)
    nan = verdicts(outcomes(tmp_path / "n", True, {"trigger-1s": math.nan}), quick=True)
    assert nan["every CPU ratio to"] == (False, True)
    outs = outcomes(tmp_path / "x", True, {})
    wrong = {"produced_at_stop": 10, "read": 10, "exactly_once": False}
    outs[2] = outcome(outs[2].config, 200.0, tmp_path / "y", stable=False, producer=wrong)
    bad = {" ".join(v.claim.split()[:4]): v for v in ov.overhead_verdicts(outs, quick=True)}
    assert not bad["every run stays stable"].holds
    once = bad["each live run counts"]
    assert not once.holds and once.headline and "files-static-1s" in once.evidence


def test_every_live_runs_producer_record_is_written_for_the_page(tmp_path: Path) -> None:
    outs = outcomes(tmp_path, False, {})
    path = ov.write_producers(outs, tmp_path / ov.PRODUCERS)
    written = json.loads(path.read_text())
    assert sorted(written) == ["files-static-1s", "redis-static-1s"]
    assert written["files-static-1s"]["exactly_once"] is True
