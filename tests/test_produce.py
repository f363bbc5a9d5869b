"""``adabatch produce``: the generator's records land in real time, whole, in order, and
read back to the generator's own per-key totals (the exactly-once oracle)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from adabatch.cli import main
from adabatch.errors import AdabatchError
from adabatch.runs.produce import (
    ProduceStatus,
    generator_totals,
    landed_totals,
    produce,
)
from adabatch.sources.generator import ARROW_SCHEMA

ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
NAME = re.compile(r"^part-(\d{6})-(\d{12})\.(json|csv|parquet)$")
COLUMNS = ["offset", "event_time", "key", "value", "line", "stream"]
REDIS_URL = "redis://127.0.0.1:6379/0"


def parts(directory: Path) -> list[Path]:
    """The landed files in name order; nothing else may be in the directory."""
    names = sorted(p.name for p in directory.iterdir())
    assert all(NAME.match(n) for n in names), names  # no temporary file left behind
    return [directory / n for n in names]


def test_files_land_span_by_span_in_name_order_and_sum_to_the_generator(tmp_path: Path) -> None:
    land = tmp_path / "land"
    seen: list[list[str]] = []

    def watch(status: ProduceStatus) -> None:
        seen.append(sorted(p.name for p in land.iterdir() if not p.name.startswith(".")))

    result = produce(
        f"files:{land}", "constant:2000", 2.0, seed=3, keys=40, file_every_s=0.5, on_progress=watch
    )
    assert (result.records, result.units, result.unit, result.interrupted) == (
        4000,
        4,
        "files",
        False,
    )
    files = parts(land)
    assert [p.name for p in files] == seen[-1]
    # every file appeared after the ones before it: what was seen is always a prefix
    assert all(s == seen[-1][: len(s)] for s in seen)
    first_offsets, offset = [], 0
    for path in files:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        assert list(rows[0]) == COLUMNS
        assert [r["offset"] for r in rows] == list(range(offset, offset + len(rows)))
        assert all(ISO_Z.match(r["event_time"]) for r in rows)
        first_offsets.append(int(NAME.match(path.name).group(2)))
        assert first_offsets[-1] == offset
        offset += len(rows)
    assert offset == 4000
    assert [int(NAME.match(p.name).group(1)) for p in files] == [0, 1, 2, 3]
    expected = generator_totals("constant:2000", 4000, seed=3, keys=40)
    assert landed_totals(f"files:{land}") == expected
    assert sum(n for n, _ in expected.values()) == 4000 and len(expected) == 40
    assert "4,000 records" in result.summary_line()
    assert "in 4 files" in result.summary_line()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_csv_and_parquet_land_the_same_records(fmt: str, tmp_path: Path) -> None:
    land = tmp_path / fmt
    options = {"distribution": "zipf"}
    result = produce(
        f"files:{land}", "constant:1000", 0.6, file_format=fmt, file_every_s=0.3,
        keys=25, source_options=options,
    )  # fmt: skip
    assert result.records == 600
    files = parts(land)
    assert len(files) == 2
    assert all(p.suffix == f".{fmt}" for p in files)
    if fmt == "csv":
        as_text = pacsv.ConvertOptions(column_types={"event_time": pa.string()})
        table = pacsv.read_csv(files[0], convert_options=as_text)
        assert table.column_names == COLUMNS
        assert all(ISO_Z.match(t) for t in table.column("event_time").to_pylist())
    else:
        table = pq.read_table(files[0])
        assert table.schema.equals(ARROW_SCHEMA)
    expected = generator_totals("constant:1000", 600, keys=25, source_options=options)
    assert landed_totals(f"files:{land}") == expected


def test_a_second_run_continues_the_file_sequence(tmp_path: Path) -> None:
    land = tmp_path / "land"
    produce(f"files:{land}", "constant:500", 0.2, file_every_s=0.1)
    produce(f"files:{land}", "constant:500", 0.2, file_every_s=0.1)
    seqs = [int(NAME.match(p.name).group(1)) for p in parts(land)]
    assert seqs == list(range(4))
    twice = generator_totals("constant:500", 100)
    assert landed_totals(f"files:{land}") == {k: (2 * n, 2 * v) for k, (n, v) in twice.items()}


def test_a_stop_ends_the_run_after_the_file_in_hand(tmp_path: Path) -> None:
    land = tmp_path / "land"
    stop = threading.Event()

    def stop_after_first(status: ProduceStatus) -> None:
        if status.units >= 1:
            stop.set()

    result = produce(
        f"files:{land}", "constant:1000", 30.0, file_every_s=0.2, on_progress=stop_after_first,
        stop=stop,
    )  # fmt: skip
    assert result.interrupted and result.units == 1 and result.records == 200
    assert "stopped early" in result.summary_line()
    assert landed_totals(f"files:{land}") == generator_totals("constant:1000", 200)
    assert len(parts(land)) == 1


def test_a_behind_producer_says_so_and_drops_nothing(tmp_path: Path) -> None:
    status = ProduceStatus(3.0, 60.0, 9000, 3, "files", 3000.0, 2.5)
    assert "BEHIND by 2.5s" in status.text() and "nothing dropped" in status.text()
    assert "BEHIND" not in ProduceStatus(3.0, 60.0, 9000, 3, "files", 3000.0, 0.2).text()
    # more records per second than the generator makes on one core: it lags, writes all
    land = tmp_path / "land"
    result = produce(f"files:{land}", "constant:150000", 1.0, file_format="parquet")
    assert result.records == 150_000
    assert landed_totals(f"files:{land}") == generator_totals("constant:150000", 150_000)


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    land = f"files:{tmp_path / 'l'}"
    with pytest.raises(AdabatchError, match="--to 'nowhere' is not allowed"):
        produce("nowhere", "constant:10", 1.0)
    with pytest.raises(AdabatchError, match="--format 'xml' is not allowed: allowed json, csv"):
        produce(land, "constant:10", 1.0, file_format="xml")
    with pytest.raises(AdabatchError, match=r"--file-every 0\.01 s is not allowed"):
        produce(land, "constant:10", 1.0, file_every_s=0.01)
    with pytest.raises(AdabatchError, match="--duration 0 s is not allowed"):
        produce(land, "constant:10", 0.0)
    with pytest.raises(AdabatchError, match="generator source has no option 'colour'"):
        produce(land, "constant:10", 1.0, source_options={"colour": "red"})
    assert not (tmp_path / "l").exists()


def test_an_unreachable_redis_is_one_line() -> None:
    with pytest.raises(AdabatchError, match=r"cannot reach Redis for redis://127\.0\.0\.1:1/0/s"):
        produce("redis://127.0.0.1:1/s", "constant:10", 1.0)


# ------------------------------------------------------------------ Redis


@pytest.fixture
def stream() -> str:
    """A fresh stream key on the local Redis, deleted afterwards."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    key = f"adabatch-test-produce-{uuid.uuid4().hex}"
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"no Redis at {REDIS_URL}: {exc}")
    try:
        yield key
    finally:
        client.delete(key)
        client.close()


@pytest.mark.services
def test_redis_entries_are_strings_in_order_and_sum_to_the_generator(stream: str) -> None:
    import redis

    result = produce(f"{REDIS_URL}/{stream}", "sine:1000:3000:1s", 1.0, seed=5, keys=30)
    assert result.records == 2000 and result.unit == "pipelines" and result.units >= 5
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        assert client.xlen(stream) == 2000
        entries = client.xrange(stream, count=2000)
    finally:
        client.close()
    assert [int(f["offset"]) for _, f in entries] == list(range(2000))
    assert list(entries[0][1]) == COLUMNS
    assert all(ISO_Z.match(f["event_time"]) for _, f in entries)
    assert landed_totals(f"{REDIS_URL}/{stream}") == generator_totals(
        "sine:1000:3000:1s", 2000, seed=5, keys=30
    )


@pytest.mark.services
def test_redis_maxlen_trims_and_a_key_of_another_type_is_refused(stream: str) -> None:
    import redis

    produce(f"{REDIS_URL}/{stream}", "constant:3000", 1.0, maxlen=100)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        assert 100 <= client.xlen(stream) < 1000
        client.delete(stream)
        client.set(stream, "not a stream")
    finally:
        client.close()
    with pytest.raises(AdabatchError, match="holds a string, not a stream"):
        produce(f"{REDIS_URL}/{stream}", "constant:10", 1.0)


# ------------------------------------------------------------------ the command line


WITHOUT_SPARK = (
    "import sys\n"
    "for name in ('pyspark', 'pyarrow', 'py4j', 'redis'):\n"
    "    sys.modules[name] = None\n"
    "from adabatch.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def cli(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", code] if code else [sys.executable, "-m", "adabatch.cli"]
    return subprocess.run(
        [*argv, "produce", *args], capture_output=True, text=True, timeout=120,
        env=dict(os.environ),
    )  # fmt: skip


def argv_of(tmp_path: Path, args: list[str]) -> list[str]:
    """``produce`` arguments: good ones, with ``args`` (flag, value pairs) replacing them."""
    base = {"--to": f"files:{tmp_path / 'l'}", "--profile": "constant:10", "--duration": "1s"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    return ["produce", *(x for k, v in {**base, **given}.items() for x in (k, v))]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--to", "kafka://x/t"], "--to 'kafka://x/t' is not allowed: allowed files:DIR or redis"),
        (["--to", "generator"], "--to 'generator' is not allowed"),
        (["--format", "xml"], "--format 'xml'"),
        (["--file-every", "5ms"], "--file-every 0.005 s is not allowed"),
        (["--maxlen", "100"], "--maxlen applies to a Redis Stream"),
        (["--to", "redis://127.0.0.1:6379/0/s", "--format", "csv"], "--format applies to files"),
        (["--to", "redis://127.0.0.1:6379/0/s", "--maxlen", "0"], "--maxlen '0'"),
        (["--duration", "soon"], "duration 'soon' is not a duration"),
        (["--duration", "2 days"], "--duration 172800 s is not allowed"),
        (["--profile", "sine:1"], "profile 'sine:1'"),
        (["--seed", "-1"], "--seed '-1'"),
        (["--source-option", "colour=red"], "generator source has no option 'colour'"),
    ],
)
def test_cli_errors_are_one_line(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(argv_of(tmp_path, args)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("adabatch: error: ")
    assert needle in err
    assert not (tmp_path / "l").exists()


def test_cli_checks_its_inputs_before_the_spark_extra(tmp_path: Path) -> None:
    bad = cli(*argv_of(tmp_path, ["--to", "kafka://x/t"])[1:], code=WITHOUT_SPARK)
    assert bad.returncode == 2 and "--to 'kafka://x/t' is not allowed" in bad.stderr
    fine = cli(*argv_of(tmp_path, [])[1:], code=WITHOUT_SPARK)
    assert fine.returncode == 2 and fine.stderr.count("\n") == 1
    assert "needs the spark extra (pyarrow is not installed)" in fine.stderr
    assert not (tmp_path / "l").exists()


def test_cli_unreachable_redis_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(argv_of(tmp_path, ["--to", "redis://127.0.0.1:1/0/s"])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "cannot reach Redis for redis://127.0.0.1:1/0/s" in err


def test_ctrl_c_stops_after_the_current_file_with_nothing_partial(tmp_path: Path) -> None:
    land = tmp_path / "land"
    proc = subprocess.Popen(
        [sys.executable, "-m", "adabatch.cli", "produce", "--to", f"files:{land}",
         "--profile", "constant:2000", "--duration", "60s", "--file-every", "0.2s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (land.is_dir() and len(list(land.glob("part-*"))) >= 2):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.02)  # polling for the producer's files, not standing in for work
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    written = int(re.search(r"wrote ([\d,]+) records", out).group(1).replace(",", ""))
    assert "stopped early" in out
    assert written % 400 == 0 and written >= 800  # whole 0.2 s spans only
    assert landed_totals(f"files:{land}") == generator_totals("constant:2000", written)
