"""The ``redis`` record source against the real Redis at 127.0.0.1:6379: dense offsets that
replay, arrival from entry ids that never changes for a past time, a compact manifest,
restore, and clear errors for trimmed entries, an unreachable server and bad options."""

from __future__ import annotations

import json
import math
import pickle
import time
import uuid
from collections.abc import Iterator
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest
import redis

from adabatch.errors import AdabatchError
from adabatch.sources import source_class
from adabatch.sources.redis_stream import SEGMENT_ENTRIES, RedisStreamSource
from adabatch.streaming.options import parse_options
from adabatch.streaming.partitions import batch_partitions, block_bounds

pytestmark = pytest.mark.services

URL = "redis://127.0.0.1:6379/0"
T0 = 1_900_000_000.0  # stream time 0 of the sources with a hand-set clock (Unix s)
T0_MS = int(T0 * 1000)


class Clock:
    """A hand-set wall clock (Unix s) for the discovery."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def client() -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(URL)
    yield c
    c.close()


@pytest.fixture
def key(client: redis.Redis) -> Iterator[str]:
    name = f"adabatch:test:{uuid.uuid4().hex}"
    yield name
    client.delete(name)


def source(key: str, clock: Clock | None = None, **options: object) -> RedisStreamSource:
    opts = {"url": URL, "stream": key, "schema": "key INT, value DOUBLE", **options}
    if clock is None:
        return RedisStreamSource(start_time=time.time() - 1.0, **opts)  # type: ignore[arg-type]
    return RedisStreamSource(start_time=T0, clock=clock, **opts)  # type: ignore[arg-type]


def add(client: redis.Redis, key: str, n: int, start: int = 0, at_ms: int | None = None) -> None:
    """``n`` entries key = i % 7, value = i; with ``at_ms`` their ids are at that ms."""
    pipe = client.pipeline(transaction=False)
    for i in range(start, start + n):
        entry_id = "*" if at_ms is None else f"{at_ms}-{i}"
        pipe.xadd(key, {"key": i % 7, "value": float(i)}, id=entry_id)
    pipe.execute()


def values(src: RedisStreamSource, start: int, end: int) -> list[float]:
    return src.records(start, end).column("value").to_pylist()


def test_offsets_are_dense_in_id_order_and_replay_identically(client, key) -> None:
    add(client, key, 300)
    src = source(key)
    assert src.discover() == 300
    batch = src.records(0, 300)
    assert batch.schema == pa.schema([("key", pa.int32()), ("value", pa.float64())])
    assert batch.column("value").to_pylist() == [float(i) for i in range(300)]
    assert batch.column("key").to_pylist() == [i % 7 for i in range(300)]
    add(client, key, 50, start=300)
    src.discover()
    assert src.records(0, 300).equals(batch)  # reading again changes nothing
    assert values(src, 290, 310) == [float(i) for i in range(290, 310)]
    assert src.records(5, 5).num_rows == 0


def test_executors_read_blocks_from_what_locate_gives(client, key) -> None:
    add(client, key, 200)
    here = source(key, id_column="_id")
    here.discover()
    add(client, key, 200, start=200)
    here.discover()
    parts = batch_partitions(here, 30, 370, 3, here.start_time)
    whole = here.records(30, 370)
    shipped = pickle.loads(pickle.dumps(parts))
    # an executor builds the source again from the options, without any manifest
    options = parse_options(
        {"source": "redis", "url": URL, "stream": key, "schema": "key INT, value DOUBLE",
         "idColumn": "_id", "statePath": "unused.json"}
    )  # fmt: skip
    got = []
    for part in shipped:
        there = options.build_source(part.start_time)
        got += list(there.read_block(part.start, part.end, part.located))
        there.close()
    table = pa.Table.from_batches(got)
    assert table.equals(pa.Table.from_batches([whole]))
    ids = table.column("_id").to_pylist()
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    assert len(set(ids)) == 340


def test_arrival_comes_from_the_ids_clamped_between_discoveries(client, key) -> None:
    clock = Clock(T0 + 1.0)
    src = source(key, clock)
    add(client, key, 3, at_ms=T0_MS + 100)
    add(client, key, 2, start=3, at_ms=T0_MS + 400)
    src.discover()
    assert [src.arrival_time(n) for n in (0, 4)] == [0.1, 0.4]
    assert src.arrival_time(5) == math.inf
    assert src.available(0.0999) == 0 and src.available(0.1) == 1
    assert src.available(0.4) == 5 and src.available(1.0) == 5
    # written before the last discovery, found by the next: they arrive after it
    add(client, key, 2, start=5, at_ms=T0_MS + 700)
    add(client, key, 1, start=7, at_ms=T0_MS + 1500)
    add(client, key, 1, start=8, at_ms=T0_MS + 9000)  # an id ahead of the wall clock
    clock.now = T0 + 2.0
    src.discover()
    times = [src.arrival_time(n) for n in range(9)]
    assert times == sorted(times)
    # the four found together: from just after the last discovery to this one, by position
    assert times[5] == 1.000001 and times[8] == 2.0


def test_past_availability_never_changes(client, key) -> None:
    clock = Clock(T0 + 1.0)
    src = source(key, clock)
    add(client, key, 40)
    src.available(1.0)
    grid = np.linspace(0.0, 1.0, 41)
    before = [src.available(t) for t in grid]
    # a time asked about after the last discovery is fixed too, even with no discovery
    clock.now = T0 + 1.5
    asked = src.available(1.5)
    add(client, key, 40, start=40)
    clock.now = T0 + 3.0
    src.discover()
    assert [src.available(t) for t in grid] == before
    assert src.available(1.5) == asked
    assert src.available(3.0) == 80
    assert src.arrival_time(asked) > 1.5


def test_arrivals_and_availability_agree(client, key) -> None:
    src = source(key)
    for i in range(6):
        add(client, key, 30 + i * 17, start=i * 1000)
        src.discover()
    end = src.available(math.inf)
    for n in range(0, end, 7):
        t = src.arrival_time(n)
        assert src.available(t) > n
        assert src.available(np.nextafter(t, -math.inf)) <= n
    bounds = block_bounds(src, 3, end, 4)
    assert bounds[0] == 3 and bounds[-1] == end
    assert all(lo <= hi for lo, hi in pairwise(bounds))


def test_the_manifest_is_compact(client, key) -> None:
    src = source(key)
    with_data = 0
    for i in range(5):
        add(client, key, 20, start=20 * i)
        with_data += src.discover() > 0
        for _ in range(20):
            assert src.discover() == 0  # polls that find nothing
    state = src.state()
    assert len(state["segments"]) <= with_data == 5
    for _ in range(50):
        src.discover()
    again = src.state()
    assert again["segments"] == state["segments"]
    assert len(json.dumps(again)) == len(json.dumps(state))
    # a large discovery: one segment per SEGMENT_ENTRIES entries
    add(client, key, 2 * SEGMENT_ENTRIES + 5, start=100)
    src.discover()
    assert len(src.state()["segments"]) == 5 + 3
    kept = src.records(60, 120)
    src.commit(60)  # Spark finished offsets below 60: their segments go
    after = src.state()
    assert len(after["segments"]) == 8 - 3
    assert after["base_offset"] == 60
    assert src.records(60, 120).equals(kept)
    with pytest.raises(AdabatchError, match="outside the manifest"):
        src.locate(59, 61)


def test_restore_resumes_the_same_numbering(client, key) -> None:
    add(client, key, 120)
    first = source(key)
    first.discover()
    first.commit(20)
    saved = json.loads(json.dumps(first.state()))
    add(client, key, 30, start=120)
    again = RedisStreamSource(
        url=URL, stream=key, schema="key INT, value DOUBLE", start_time=first.start_time
    )
    again.restore(saved)
    assert again.records(20, 120).equals(first.records(20, 120))
    assert again.discover() == 30
    assert values(again, 115, 150) == [float(i) for i in range(115, 150)]
    assert again.arrival_time(119) == first.arrival_time(119)
    other = source(f"{key}:other")
    with pytest.raises(AdabatchError, match="manifest is for stream"):
        other.restore(saved)


def test_trimmed_entries_stop_the_read_naming_the_ids(client, key) -> None:
    add(client, key, 100)
    src = source(key)
    src.discover()
    seg = src.state()["segments"][0]
    client.xtrim(key, maxlen=10, approximate=False)
    with pytest.raises(AdabatchError) as err:
        src.records(0, 50)
    message = str(err.value)
    assert f"90 of the 100 entries {seg[2]} .. {seg[3]}" in message
    assert f"stream {key!r}" in message and "XTRIM" in message and "new checkpoint" in message
    assert "\n" not in message
    with pytest.raises(AdabatchError, match="90 of the 100"):
        src.records(90, 100)  # still there, but their segment is not whole


def test_an_entry_deleted_inside_a_segment_is_found(client, key) -> None:
    add(client, key, 30)
    src = source(key)
    src.discover()
    middle = client.xrange(key, count=15)[-1][0]
    client.xdel(key, middle)
    with pytest.raises(AdabatchError, match="1 of the 30 entries"):
        src.records(20, 25)  # the block's own entries are there; its segment is not whole


def test_entries_trimmed_before_discovery_are_an_error(client, key) -> None:
    add(client, key, 10)
    src = source(key)
    src.discover()
    last = src.state()["last_id"]
    add(client, key, 50, start=10)
    client.xtrim(key, maxlen=5, approximate=False)  # 45 entries the query never saw are gone
    with pytest.raises(AdabatchError, match=f"45 entries after id {last} .* were trimmed"):
        src.discover()


def test_a_restored_manifest_behind_a_trimmed_stream_is_an_error(client, key) -> None:
    add(client, key, 10)
    first = source(key)
    first.discover()
    saved = first.state()
    add(client, key, 40, start=10)  # written while the query is down ...
    client.xtrim(key, maxlen=20, approximate=False)  # ... and trimmed before it came back
    again = source(key)
    again.restore(saved)
    with pytest.raises(AdabatchError, match=f"20 entries after id {saved['last_id']}"):
        again.available(1e6)


def test_a_missing_stream_has_no_records_until_a_producer_writes(client, key) -> None:
    src = source(key)
    assert src.discover() == 0
    assert src.available(1e6) == 0
    add(client, key, 3)
    assert src.discover() == 3
    assert values(src, 0, 3) == [0.0, 1.0, 2.0]
    with pytest.raises(AdabatchError, match="no entries to infer a schema from"):
        source(f"{key}:none", schema=None).spark_schema()


def test_latest_numbers_only_entries_written_after_the_start(client, key) -> None:
    add(client, key, 5)
    src = source(key, starting_position="latest")
    assert src.discover() == 0
    add(client, key, 3, start=5)
    assert src.discover() == 3
    assert values(src, 0, 3) == [5.0, 6.0, 7.0]


def test_discovery_without_scripting_finds_the_same(client, key) -> None:
    add(client, key, SEGMENT_ENTRIES + 10)
    scripted, plain = source(key), source(key)
    plain._discoverer.scripting = False  # as where Redis refuses EVAL
    scripted.discover()
    plain.discover()
    strip = lambda s: [seg[:4] for seg in s["segments"]]  # noqa: E731
    assert strip(plain.state()) == strip(scripted.state())
    assert plain.state()["last_id"] == scripted.state()["last_id"]


def test_the_schema_is_inferred_from_the_first_entries(client, key) -> None:
    client.xadd(key, {"n": "1", "x": "1.5", "s": "a", "mixed": "2"})
    client.xadd(key, {"n": "-3", "x": "2", "s": "7", "mixed": "b", "late": "4"})
    src = source(key, schema=None)
    assert src.spark_schema() == "n BIGINT, x DOUBLE, s STRING, mixed STRING, late BIGINT"
    src.discover()
    batch = src.records(0, 2)
    assert batch.column("late").to_pylist() == [None, 4]  # a missing field is null
    src.close()
    # the driver hands the executors its schema: they never infer their own
    located = src.locate(0, 2)
    assert located["schema"] == src.spark_schema()
    saved = src.state()
    assert saved["schema"] == src.spark_schema()


def test_a_value_that_does_not_cast_names_entry_field_and_value(client, key) -> None:
    client.xadd(key, {"key": "1", "value": "2.5"})
    bad = client.xadd(key, {"key": "seven", "value": "1"}).decode()
    src = source(key)
    src.discover()
    with pytest.raises(AdabatchError) as err:
        src.records(0, 2)
    message = str(err.value)
    assert f"entry {bad} field 'key'" in message and "'seven'" in message and "INT" in message


def test_an_unreachable_server_is_one_line_naming_the_url(key) -> None:
    src = source(key, url="redis://:secret@127.0.0.1:1/0", timeout=1.0)
    for call in (lambda: src.available(1e6), src.discover):
        with pytest.raises(AdabatchError) as err:
            call()
        message = str(err.value)
        assert "cannot reach redis://:***@127.0.0.1:1/0" in message
        assert "secret" not in message and "\n" not in message
    with pytest.raises(AdabatchError, match=r"cannot reach redis://127\.0\.0\.1:1 "):
        source(key, url="redis://127.0.0.1:1", schema=None, timeout=1.0).spark_schema()


def test_a_key_of_another_type_is_refused(client, key) -> None:
    client.set(key, "not a stream")
    with pytest.raises(AdabatchError, match="holds a string, not a stream"):
        source(key).discover()


def test_the_source_pickles_without_its_connection(client, key) -> None:
    add(client, key, 5)
    src = source(key)
    src.discover()
    assert src._client is not None
    copy = pickle.loads(pickle.dumps(src))
    assert copy._client is None
    assert copy.records(0, 5).equals(src.records(0, 5))
    copy.close()
    src.close()
    assert src._client is None


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("url", "http://127.0.0.1:6379", "'url' = 'http://127.0.0.1:6379' is not allowed"),
        ("url", "redis://127.0.0.1:99999/0", "'url' = 'redis://127.0.0.1:99999/0' has a bad port"),
        ("url", "redis://127.0.0.1:6379/zero", "allowed redis://HOST:PORT[/DB]"),
        ("url", "redis://u:pw@:6379/0", "'url' = 'redis://u:***@:6379/0' is not allowed"),
        ("stream", "", "'stream' must be set"),
        ("stream", "k" * 1025, "too long"),
        ("schema", "key DECIMAL(4,2)", "supported types are STRING"),
        ("max_entries_per_poll", "0", "'max_entries_per_poll' = '0' is out of range"),
        ("timeout", "-1", "'timeout' = '-1' is out of range"),
        ("starting_position", "middle", "allowed one of earliest, latest"),
        ("id_column", "", None),  # empty: no id column
    ],
)
def test_bad_option_values_are_named(option: str, value: str, expected: str | None) -> None:
    cls = source_class("redis")
    options = {"stream": "s", **{option: value}}
    if expected is None:
        assert cls.from_options(options, "constant:1").id_column is None
        return
    with pytest.raises(AdabatchError) as err:
        cls.from_options(options, "constant:1")
    assert expected in str(err.value)
    assert f"redis source option '{option}'" in str(err.value)


def test_an_id_column_that_clashes_with_the_schema_is_refused(key) -> None:
    with pytest.raises(AdabatchError, match="'id_column' = 'Key' names a column"):
        source(key, id_column="Key").spark_schema()


def test_the_stream_options_need_a_state_path() -> None:
    with pytest.raises(AdabatchError, match="needs option 'statePath'"):
        parse_options({"source": "redis", "stream": "s"})
    parsed = parse_options(
        {"source": "redis", "stream": "s", "maxEntriesPerPoll": "10", "statePath": "x.json"}
    )
    assert dict(parsed.source_options) == {"stream": "s", "max_entries_per_poll": "10"}
