"""The ``files`` source on real files in a temporary directory (no Spark): dense offsets,
arrival clamping, stable answers about the past, the manifest across restarts and commits,
row ranges of large files, dead letters, and the errors a user can cause."""

from __future__ import annotations

import itertools
import json
import os
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adabatch.errors import AdabatchError
from adabatch.sources import files_formats, source_class
from adabatch.sources.files import FilesSource
from adabatch.streaming.options import parse_options

START = 1_700_000_000.0  # Unix s of stream time 0


class Clock:
    """A hand-set wall clock (Unix s) for discoveries."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def land(directory: Path, name: str, data: str | bytes, mtime: float) -> Path:
    """Land a complete file as writers should: a hidden temporary name, then a rename."""
    tmp = directory / f".{name}.tmp"
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.utime(tmp, (mtime, mtime))
    final = directory / name
    os.rename(tmp, final)
    return final


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def tagged(name: str, n: int, start: int = 0) -> str:
    """``n`` JSON lines ``{"f": name, "i": start+j, "v": ...}``."""
    return jsonl([{"f": name, "i": start + j, "v": float(j % 7)} for j in range(n)])


SCHEMA = "f STRING, i BIGINT, v DOUBLE"


def source(d: Path, clock: Clock, **kw) -> FilesSource:
    kw.setdefault("schema", SCHEMA)
    return FilesSource(str(d), start_time=START, clock=clock, **kw)


def rows(src: FilesSource, start: int, end: int) -> list[tuple]:
    return [tuple(r.values()) for r in src.records(start, end).to_pylist()]


def test_offsets_are_dense_over_files_in_mtime_then_name_order(tmp_path):
    land(tmp_path, "b.json", tagged("b", 2), START - 5)
    land(tmp_path, "a.json", tagged("a", 3), START - 5)
    land(tmp_path, "c.json", tagged("c", 1), START - 10)
    src = source(tmp_path, Clock(START + 1))
    assert src.available(1.0) == 6
    got = [(f, i) for f, i, _ in rows(src, 0, 6)]
    assert got == [("c", 0), ("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    # files present at the first listing keep their mtimes, before stream time 0
    assert [src.arrival_time(n) for n in (0, 1, 5)] == [-10.0, -5.0, -5.0]
    assert src.arrival_time(6) == float("inf")
    assert src.available(-7.0) == 1 and src.available(-5.0) == 6


def test_arrival_is_the_mtime_clamped_into_the_listing_window(tmp_path):
    clock = Clock(START + 1)
    land(tmp_path, "a.json", tagged("a", 1), START - 1)
    src = source(tmp_path, clock)
    assert src.available(1.0) == 1
    land(tmp_path, "old.json", tagged("old", 2), START - 100)  # cp -p: an old mtime
    land(tmp_path, "mid.json", tagged("mid", 1), START + 2)
    land(tmp_path, "future.json", tagged("future", 1), START + 50)  # clock skew
    clock.t = START + 3
    assert src.available(3.0) == 5
    assert src.arrival_time(1) == pytest.approx(1.0 + 1e-6)  # just after the last listing
    assert src.arrival_time(3) == 2.0  # its mtime, inside the window
    assert src.arrival_time(4) == 3.0  # this listing's time
    assert [src.available(t) for t in (1.0, 1.5, 2.0, 2.5, 3.0)] == [1, 3, 4, 4, 5]


def test_answers_about_past_times_never_change(tmp_path):
    clock = Clock(START + 1)
    land(tmp_path, "a.json", tagged("a", 4), START - 2)
    src = source(tmp_path, clock)
    times = [-3.0, -2.0, 0.0, 0.5, 1.0]
    before = [src.available(t) for t in times]
    arrivals = [src.arrival_time(n) for n in range(4)]
    # asked about 1.02 s while listing is rate-limited (the clock has not moved): a file
    # with an earlier mtime found later must not change that answer
    assert src.available(1.02) == 4
    land(tmp_path, "late.json", tagged("late", 3), START + 1.01)
    clock.t = START + 2
    assert src.available(2.0) == 7
    assert src.arrival_time(4) > 1.02
    assert [src.available(t) for t in times] == before
    assert src.available(1.02) == 4
    assert [src.arrival_time(n) for n in range(4)] == arrivals


def test_restore_maps_the_same_offsets_to_the_same_rows_and_numbers_on(tmp_path):
    clock = Clock(START + 1)
    for k, name in enumerate(["a.json", "b.json", "c.json"]):
        land(tmp_path, name, tagged(name[0], 5 + k), START - 10 + k)
    first = source(tmp_path, clock)
    total = first.available(1.0)
    first.commit(5)  # a.json done
    saved = json.loads(json.dumps(first.state()))
    again = source(tmp_path, Clock(START + 5))
    again.restore(saved)
    assert rows(again, 5, total) == rows(first, 5, total)
    assert again.arrival_time(7) == first.arrival_time(7)
    land(tmp_path, "d.json", tagged("d", 2), START + 3)
    assert again.available(5.0) == total + 2
    assert rows(again, total, total + 2) == [("d", 0, 0.0), ("d", 1, 1.0)]
    assert again.available(1.0) == total  # the restored past is unchanged


def test_manifest_stays_the_same_over_empty_polls_and_shrinks_on_commit(tmp_path):
    clock = Clock(START + 1)
    for k in range(4):
        land(tmp_path, f"f{k}.json", tagged(f"f{k}", 3), START - 10 + k)
    src = source(tmp_path, clock)
    assert src.available(1.0) == 12
    size = len(json.dumps(src.state()))
    for step in range(200):
        clock.t = START + 2 + step * 0.05
        assert src.available(clock.t - START) == 12
    assert len(json.dumps(src.state())) == size
    src.commit(7)  # f0, f1 wholly below 7; f2 (6..8) stays
    state = src.state()
    assert [f[0] for f in state["files"]] == ["f2.json", "f3.json"]
    assert sorted(n for n, _, _ in state["committed"]) == ["f0.json", "f1.json"]
    assert src.available(100.0) == 12  # committed files are not taken again
    assert rows(src, 7, 9) == [("f2", 1, 1.0), ("f2", 2, 2.0)]
    with pytest.raises(AdabatchError, match="not in the manifest"):
        src.locate(3, 9)
    # a committed file deleted is forgotten; its name may come back as a new file
    (tmp_path / "f0.json").unlink()
    clock.t += 1
    assert src.available(clock.t - START) == 12
    assert sorted(n for n, _, _ in src.state()["committed"]) == ["f1.json"]
    land(tmp_path, "f0.json", tagged("again", 2), START + 20)
    clock.t += 1
    # found now, but 100 s was answered already: it arrives just after that
    assert src.available(clock.t - START) == 12
    assert src.available(100.0) == 12 and src.available(100.001) == 14
    assert rows(src, 12, 14) == [("again", 0, 0.0), ("again", 1, 1.0)]


def test_max_file_age_forgets_old_names_and_refuses_old_newcomers(tmp_path):
    clock = Clock(START + 1)
    land(tmp_path, "old.json", tagged("old", 1), START - 10 * 86_400)
    land(tmp_path, "new.json", tagged("new", 1), START - 1)
    src = source(tmp_path, clock)
    assert src.available(1.0) == 2
    src.commit(2)
    assert [n for n, _, _ in src.state()["committed"]] == ["new.json"]
    clock.t = START + 2
    assert src.available(2.0) == 2  # old.json, forgotten, is still not taken again
    saved = src.state()
    land(tmp_path, "ancient.json", tagged("ancient", 1), START - 20 * 86_400)
    clock.t = START + 3
    with pytest.raises(AdabatchError, match=r"ancient\.json.*maxFileAge"):
        src.available(3.0)
    # a restarted driver takes what is already there and old as read (Spark's rule)
    again = source(tmp_path, Clock(START + 4))
    again.restore(saved)
    assert again.available(4.0) == 2


def test_max_files_per_trigger_spreads_a_backlog_over_listings(tmp_path):
    clock = Clock(START + 1)
    for k in range(5):
        land(tmp_path, f"f{k}.json", tagged(f"f{k}", 2), START - 10 + k)
    src = source(tmp_path, clock, max_files_per_trigger=2)
    seen = []
    for step in range(4):
        clock.t = START + 1 + step
        seen.append(src.available(clock.t - START))
    assert seen == [4, 8, 10, 10]
    assert [f for f, _, _ in rows(src, 0, 10)][::2] == ["f0", "f1", "f2", "f3", "f4"]
    assert src.arrival_time(4) == pytest.approx(1.0 + 1e-6)  # after the first listing


def test_a_large_file_split_into_blocks_is_read_exactly_once(tmp_path, monkeypatch):
    monkeypatch.setattr(files_formats, "INDEX_BYTES", 2_000)  # index a small file densely
    monkeypatch.setattr(files_formats, "READ_CHUNK", 700)
    n = 1_000
    land(tmp_path, "big.json", tagged("big", n), START - 5)
    land(tmp_path, "small.json", tagged("small", 3), START - 4)
    src = source(tmp_path, Clock(START + 1))
    assert src.available(1.0) == n + 3
    assert len(src.state()["files"][0][6]) > 10  # the line index of big.json
    bounds = [0, 1, 37, 38, 500, 999, 1001, n + 3]
    got = []
    for lo, hi in itertools.pairwise(bounds):
        located = src.locate(lo, hi)
        if 100 <= lo < n:  # an executor seeks past the start of the file
            assert 0 < located.slices[0].seek[0] <= lo
        for batch in src.read_block(lo, hi, located):
            got += [(r["f"], r["i"]) for r in batch.to_pylist()]
    assert got == [("big", i) for i in range(n)] + [("small", i) for i in range(3)]


def test_bad_rows_go_to_the_dead_letter_once_with_file_and_line(tmp_path):
    text = (
        '{"f": "x", "i": 1, "v": 1}\n'
        "not json\n"
        "\n"  # blank: nothing, and no dead letter
        '{"f": "x", "i": "two", "v": 2}\n'
        '{"f": "x", "i": 3, "v": 3}\n'
        '{"f": "x", "i": 4, "v'  # cut mid-record, no newline
    )
    path = land(tmp_path, "a.json", text, START - 1)
    src = source(tmp_path, Clock(START + 1))
    assert src.available(1.0) == 6
    for _ in range(2):  # a replayed block overwrites its dead letter
        assert [r[1] for r in rows(src, 0, 6)] == [1, 3]
    dead = tmp_path / "_dead_letter"
    files = sorted(os.listdir(dead))
    assert files == ["a.json.rows-0-6.jsonl"]
    records = [json.loads(x) for x in (dead / files[0]).read_text().splitlines()]
    assert [(r["line"], r["offset"]) for r in records] == [(2, 1), (4, 3), (6, 5)]
    assert all(r["file"] == str(path) for r in records)
    assert records[0]["text"] == "not json"
    assert "column 'i'" in records[1]["error"] and "two" in records[1]["error"]
    assert records[2]["text"] == '{"f": "x", "i": 4, "v'
    # the dead-letter directory is itself skipped by discovery
    assert src.available(1.0) == 6


def test_a_deleted_or_truncated_file_is_an_error_naming_it(tmp_path):
    a = land(tmp_path, "a.json", tagged("a", 3), START - 2)
    b = land(tmp_path, "b.json", tagged("b", 3), START - 1)
    src = source(tmp_path, Clock(START + 1))
    assert src.available(1.0) == 6
    located = src.locate(0, 6)
    os.unlink(a)
    with pytest.raises(AdabatchError, match=r"a\.json was deleted before it was read"):
        list(src.read_block(0, 6, located))
    b.write_text(tagged("b", 1))
    with pytest.raises(AdabatchError, match=r"b\.json truncated"):
        list(src.read_block(3, 6, src.locate(3, 6)))


def test_a_taken_file_that_changes_size_is_an_error_at_the_next_listing(tmp_path):
    clock = Clock(START + 1)
    path = land(tmp_path, "a.json", tagged("a", 3), START - 1)
    src = source(tmp_path, clock)
    assert src.available(1.0) == 3
    with path.open("a") as f:
        f.write(tagged("a", 1, start=3))
    clock.t = START + 2
    with pytest.raises(AdabatchError, match=r"a\.json changed size after it was taken"):
        src.available(2.0)


def test_hidden_underscore_files_and_directories_are_skipped(tmp_path):
    land(tmp_path, "a.json", tagged("a", 2), START - 1)
    (tmp_path / ".writing.json").write_text(tagged("hidden", 5))
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "_tmp.json").write_text(tagged("under", 5))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.json").write_text(tagged("sub", 5))
    src = source(tmp_path, Clock(START + 1))
    assert src.available(1.0) == 2
    assert [f[0] for f in src.state()["files"]] == ["a.json"]


def test_schema_inference_per_format(tmp_path):
    j = tmp_path / "j"
    j.mkdir()
    land(j, "a.json", 'garbage\n{"id": 1, "name": "x", "ok": true, "p": 1.5, "o": {"k": 1}}\n', 1)
    land(j, "b.json", '{"other": 1}\n', 2)
    src = FilesSource(str(j))
    assert src.spark_schema() == "id BIGINT, name STRING, ok BOOLEAN, p DOUBLE, o STRING"
    c = tmp_path / "c"
    c.mkdir()
    text = "id,price,when,day,flag,big,name\n1,2.5,2024-01-01T10:00:00Z,2024-01-02,true,1,x\n"
    land(c, "a.csv", text + "2,3,2024-01-01 11:00,2024-01-03,false,5000000000,\n", 1)
    assert FilesSource(str(c), format="csv").spark_schema() == (
        "id INT, price DOUBLE, when TIMESTAMP, day DATE, flag BOOLEAN, big BIGINT, name STRING"
    )
    no_header = FilesSource(str(c), format="csv", header=False).spark_schema()
    assert no_header.startswith("_c0 STRING, _c1 STRING")
    q = tmp_path / "q"
    q.mkdir()
    land(q, "a.csv", "a-b,,a-b\n1,x,2.5\n", 1)
    odd = FilesSource(str(q), format="csv")
    assert odd.spark_schema() == "`a-b` INT, _c1 STRING, `a-b2` DOUBLE"
    assert odd.records(0, odd.available(1e12)).to_pylist() == [{"a-b": 1, "_c1": "x", "a-b2": 2.5}]
    p = tmp_path / "p"
    p.mkdir()
    table = pa.table({"k": pa.array([1], pa.int32()), "b": pa.array([b"x"], pa.large_binary())})
    pq.write_table(table, p / "a.parquet")
    assert FilesSource(str(p), format="parquet").spark_schema() == "k INT, b BINARY"
    table = pa.table({"k": pa.array([1], pa.int32()), "d": pa.array([Decimal("1.25")])})
    pq.write_table(table, p / "b.parquet")
    os.utime(p / "b.parquet", (0, 0))  # now the oldest
    with pytest.raises(AdabatchError, match=r"column 'd' has Arrow type decimal.*give option"):
        FilesSource(str(p), format="parquet").spark_schema()


def test_schema_and_directory_errors_say_what_to_do(tmp_path):
    with pytest.raises(AdabatchError, match="give option schema or land a file first"):
        FilesSource(str(tmp_path)).spark_schema()
    missing = tmp_path / "nope"
    with pytest.raises(AdabatchError, match=r"'path' = .*nope.*no such directory"):
        FilesSource(str(missing), schema="a INT").spark_schema()
    with pytest.raises(AdabatchError, match=r"'schema'.*ARRAY<INT>.*supported types are STRING"):
        FilesSource(str(tmp_path), schema="a ARRAY<INT>")
    with pytest.raises(AdabatchError, match="names column 'A' twice"):
        FilesSource(str(tmp_path), schema="a INT, A STRING")
    with pytest.raises(AdabatchError, match="option 'path' must be set"):
        FilesSource.from_options({}, "constant:1")
    with pytest.raises(AdabatchError, match="'format'"):
        FilesSource(str(tmp_path), format="avro")
    (tmp_path / "a.json").write_text("[1, 2]\nnot json\n")
    with pytest.raises(AdabatchError, match="cannot infer a schema"):
        FilesSource(str(tmp_path)).spark_schema()


def test_csv_with_header_types_and_bad_rows(tmp_path):
    text = (
        "id,price,when,day,ok,name\n"
        "1,2.5,2024-01-01T10:00:00Z,2024-01-02,true,a b\n"
        "2,,2024-01-01 11:00:00,,false,\n"
        "3,x,2024-01-01,2024-01-02,true,c\n"  # price not a number
        "4,1.0\n"  # too few columns
        '"5",3,2024-01-01T00:00:00+01:00,2024-02-29,FALSE,"d, e"\n'
    )
    land(tmp_path, "a.csv", text, START - 1)
    schema = "id INT, price DOUBLE, `when` TIMESTAMP, day DATE, ok BOOLEAN, name STRING"
    src = FilesSource(str(tmp_path), format="csv", schema=schema, start_time=START)
    assert src.available(1e9) == 5
    got = src.records(0, 5)
    assert got.schema.field("when").type == pa.timestamp("us", tz="UTC")
    out = got.to_pylist()
    assert [r["id"] for r in out] == [1, 2, 5]
    assert out[1]["price"] is None and out[1]["day"] is None
    assert [r["name"] for r in out] == ["a b", "", "d, e"]
    assert [r["ok"] for r in out] == [True, False, False]
    assert out[2]["when"].isoformat() == "2023-12-31T23:00:00+00:00"
    dead = tmp_path / "_dead_letter" / "a.csv.rows-0-5.jsonl"
    bad = [json.loads(x) for x in dead.read_text().splitlines()]
    assert [(b["line"], b["offset"]) for b in bad] == [(4, 2), (5, 3)]
    assert "expected 6 columns, got 2" in bad[1]["error"]


def test_parquet_row_ranges_across_row_groups(tmp_path):
    n = 1_000
    table = pa.table({"i": pa.array(range(n), pa.int64()), "s": [f"r{i}" for i in range(n)]})
    pq.write_table(table, tmp_path / ".a.parquet", row_group_size=128)
    os.rename(tmp_path / ".a.parquet", tmp_path / "a.parquet")
    src = FilesSource(str(tmp_path), format="parquet", schema="i INT, s STRING, extra DOUBLE")
    assert src.available(1e12) == n
    got = []
    for lo, hi in [(0, 100), (100, 129), (129, 700), (700, n)]:
        for batch in src.read_block(lo, hi, src.locate(lo, hi)):
            assert batch.schema.field("i").type == pa.int32()
            got += batch.to_pylist()
    assert [r["i"] for r in got] == list(range(n))
    assert got[5] == {"i": 5, "s": "r5", "extra": None}


def test_parquet_values_that_do_not_fit_go_to_the_dead_letter(tmp_path):
    table = pa.table({"i": pa.array([1, 2**40, 3], pa.int64())})
    pq.write_table(table, tmp_path / "a.parquet")
    src = FilesSource(str(tmp_path), format="parquet", schema="i INT")
    assert src.available(1e12) == 3
    assert [r["i"] for r in src.records(0, 3).to_pylist()] == [1, 3]
    bad = (tmp_path / "_dead_letter" / "a.parquet.rows-0-3.jsonl").read_text().splitlines()
    assert [json.loads(b)["line"] for b in bad] == [2]


def test_json_types_follow_the_schema(tmp_path):
    lines = [
        {"s": 5, "t": 1_700_000_000.5, "d": "2024-01-02", "b": True, "x": 1, "f": 1},
        {"s": {"a": [1]}, "t": "2024-01-01T00:00:00", "d": None, "b": False, "x": 7, "f": 2.5},
        {"s": "ok", "t": "yesterday", "b": 1, "x": 1, "f": 1},  # bad t and b
        {"s": "big", "f": 1e39},  # FLOAT overflow
        {"s": "frac", "x": 1.5},  # not an integer
    ]
    land(tmp_path, "a.json", jsonl(lines), START - 1)
    schema = "s STRING, t TIMESTAMP, d DATE, b BOOLEAN, x SMALLINT, f FLOAT"
    src = FilesSource(str(tmp_path), schema=schema)
    got = src.records(0, src.available(1e12)).to_pylist()
    assert [r["s"] for r in got] == ["5", '{"a":[1]}']
    assert got[0]["t"].timestamp() == 1_700_000_000.5
    assert str(got[0]["d"]) == "2024-01-02" and got[1]["d"] is None
    assert [r["x"] for r in got] == [1, 7] and got[1]["f"] == 2.5
    dead = (tmp_path / "_dead_letter" / "a.json.rows-0-5.jsonl").read_text().splitlines()
    assert [json.loads(b)["line"] for b in dead] == [3, 4, 5]


def test_options_reach_the_source_in_camel_case_and_need_a_state_path(tmp_path):
    opts = {
        "source": "files",
        "path": str(tmp_path),
        "schema": SCHEMA,
        "maxFilesPerTrigger": "3",
        "maxFileAge": "1h",
        "deadLetterPath": str(tmp_path / "dl"),
    }
    with pytest.raises(AdabatchError, match="statePath"):
        parse_options(opts)
    parsed = parse_options({**opts, "statePath": str(tmp_path / "state.json")})
    src = parsed.build_source(START)
    assert isinstance(src, FilesSource) and source_class("files") is FilesSource
    assert (src.max_files, src.max_age_ns, src.dead_letter) == (
        3,
        3_600 * 10**9,
        str(tmp_path / "dl"),
    )
    assert src.spark_schema() == "f STRING, i BIGINT, v DOUBLE"


def test_hostile_lines_are_dead_letters_not_crashes(tmp_path):
    text = "[" * 100_000 + "\n" + '{"f": "ok", "i": 1}\n' + "\xff\xfe\n"
    land(tmp_path, "a.json", text.encode("latin-1"), START - 1)
    src = FilesSource(str(tmp_path), schema=SCHEMA)
    assert src.available(1e12) == 3
    assert [r["f"] for r in src.records(0, 3).to_pylist()] == ["ok"]
    dead = (tmp_path / "_dead_letter" / "a.json.rows-0-3.jsonl").read_text().splitlines()
    assert [json.loads(b)["line"] for b in dead] == [1, 3]


def test_latest_takes_the_files_already_there_as_read_and_numbers_new_ones_from_zero(tmp_path):
    clock = Clock(START + 1)
    land(tmp_path, "a.json", tagged("a", 3), START - 5)
    before = land(tmp_path, "b.json", tagged("b", 2), START - 4)
    src = source(tmp_path, clock, starting_position="latest")
    assert src.available(1.0) == 0
    state = src.state()
    assert (state["next"], state["files"]) == (0, [])
    assert sorted(n for n, _, _ in state["committed"]) == ["a.json", "b.json"]
    land(tmp_path, "c.json", tagged("c", 2), START + 1.5)
    clock.t = START + 2
    assert src.available(2.0) == 2
    assert rows(src, 0, 2) == [("c", 0, 0.0), ("c", 1, 1.0)]
    assert src.arrival_time(0) == 1.5
    clock.t = START + 3
    assert src.available(3.0) == 2  # a and b are never taken
    # earliest, the default, reads the same directory from its first file
    everything = source(tmp_path, Clock(START + 3))
    assert everything.starting_position == "earliest"
    assert everything.available(3.0) == 7
    assert [f for f, _, _ in rows(everything, 0, 7)] == ["a"] * 3 + ["b"] * 2 + ["c"] * 2
    # a file taken as read is held to the writers' rule like one read
    with before.open("a") as f:
        f.write(tagged("b", 1, start=2))
    clock.t = START + 4
    with pytest.raises(AdabatchError, match=r"b\.json changed size after it was taken"):
        src.available(4.0)


def test_a_restarted_latest_query_keeps_its_numbering_and_never_takes_the_skipped(tmp_path):
    clock = Clock(START + 1)
    land(tmp_path, "a.json", tagged("a", 3), START - 5)
    first = source(tmp_path, clock, starting_position="latest")
    unlisted = json.loads(json.dumps(first.state()))  # saved before its first listing
    assert first.available(1.0) == 0
    land(tmp_path, "b.json", tagged("b", 2), START + 1.5)
    clock.t = START + 2
    assert first.available(2.0) == 2
    first.commit(1)  # inside b: nothing forgotten
    saved = json.loads(json.dumps(first.state()))
    land(tmp_path, "c.json", tagged("c", 1), START + 2.5)
    again = source(tmp_path, Clock(START + 3), starting_position="latest")
    again.restore(saved)
    assert again.available(3.0) == 3
    assert rows(again, 0, 3) == [("b", 0, 0.0), ("b", 1, 1.0), ("c", 0, 0.0)]
    assert again.arrival_time(0) == first.arrival_time(0) == 1.5
    # the same restart as an earliest query: the manifest decides, not the option
    other = source(tmp_path, Clock(START + 3))
    other.restore(saved)
    assert other.available(3.0) == 3
    # a query that never listed is still new: it skips all there at its first listing
    fresh = source(tmp_path, Clock(START + 3), starting_position="latest")
    fresh.restore(unlisted)
    assert fresh.available(3.0) == 0


def test_latest_remembers_skipped_names_only_within_max_file_age(tmp_path):
    clock = Clock(START + 1)
    for k in range(3):
        land(tmp_path, f"old{k}.json", tagged("old", 1), START - 10 * 86_400 - k)
    land(tmp_path, "recent.json", tagged("recent", 1), START - 1)
    src = source(tmp_path, clock, starting_position="latest")
    assert src.available(1.0) == 0
    assert [n for n, _, _ in src.state()["committed"]] == ["recent.json"]
    clock.t = START + 2
    assert src.available(2.0) == 0  # the old ones, forgotten, are still not taken
    # a skipped file deleted is forgotten; its name may come back as a new file
    (tmp_path / "recent.json").unlink()
    clock.t = START + 3
    assert src.available(3.0) == 0
    assert src.state()["committed"] == []
    land(tmp_path, "recent.json", tagged("again", 2), START + 3.5)
    clock.t = START + 4
    assert src.available(4.0) == 2
    assert [f for f, _, _ in rows(src, 0, 2)] == ["again", "again"]


def test_starting_position_is_checked_and_reaches_the_source_in_camel_case(tmp_path):
    with pytest.raises(
        AdabatchError,
        match=r"'starting_position' = 'newest' is not allowed: allowed one of earliest, latest",
    ):
        FilesSource(str(tmp_path), schema=SCHEMA, starting_position="newest")
    opts = {"source": "files", "path": str(tmp_path), "schema": SCHEMA}
    opts["statePath"] = str(tmp_path / "state.json")
    src = parse_options({**opts, "startingPosition": "latest"}).build_source(START)
    assert isinstance(src, FilesSource) and src.starting_position == "latest"
    with pytest.raises(AdabatchError, match=r"'newest'.*allowed one of earliest, latest"):
        parse_options({**opts, "startingPosition": "newest"}).build_source(START)
