"""Workload config, registry, database URLs and the sliding window's pure logic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adabatch.errors import AdabatchError
from adabatch.workloads import WORKLOAD_NAMES, WorkloadConfig, get_workload
from adabatch.workloads.sinks import Database, parse_db_url
from adabatch.workloads.window import Partial, SlidingWindow


def cfg(tmp_path, **kw):
    base = {"name": "reduce", "out_dir": tmp_path, "run_id": "r"}
    return WorkloadConfig(**{**base, **kw})


def test_names_match_the_simulator_and_registry():
    assert WORKLOAD_NAMES == ("filter", "reduce", "join", "window")
    for name in WORKLOAD_NAMES:
        assert get_workload(name).name == name


def test_unknown_workload_lists_the_names(tmp_path):
    with pytest.raises(AdabatchError, match="unknown workload 'sort': allowed filter, reduce"):
        get_workload("sort")
    with pytest.raises(AdabatchError, match="unknown workload 'sort'"):
        cfg(tmp_path, name="sort")


def test_defaults_and_default_database(tmp_path):
    c = cfg(tmp_path / "out")
    assert c.keys == 1000 and c.window_s == 20.0 and c.per_key_commit is False
    assert c.database_url == f"sqlite:///{(tmp_path / 'out' / 'results.sqlite').resolve()}"
    get_workload("reduce").check(c)  # creates out_dir and the tables
    assert (tmp_path / "out" / "results.sqlite").is_file()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("keys", 0, "keys=0 is not allowed: integer >= 1"),
        ("keys", 2.5, "keys=2.5"),
        ("keys", True, "keys=True"),
        ("window_s", 0.0, "window_s=0.0 is not allowed"),
        ("window_s", float("nan"), "window_s=nan"),
        ("filter_words", (), "filter_words=()"),
        ("filter_words", "spark", "filter_words='spark'"),
        ("filter_words", ("two words",), "filter word 'two words'"),
        ("per_key_commit", 1, "per_key_commit=1"),
        ("run_id", "", "run_id ''"),
        ("db_url", "mysql://x/y", "unsupported scheme"),
        ("db_url", "sqlite:///", "names no SQLite file"),
        ("table_prefix", "x; drop", "table_prefix 'x; drop'"),
    ],
)
def test_bad_options_name_the_option(tmp_path, option, value, message):
    with pytest.raises(AdabatchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cfg(tmp_path, **{option: value})


def test_db_url_forms_and_redaction():
    assert parse_db_url("sqlite:///tmp/a.db").location == "/tmp/a.db"
    assert parse_db_url("sqlite:////tmp/a.db").location == "/tmp/a.db"
    assert parse_db_url("sqlite:rel/a.db").location == "rel/a.db"
    assert parse_db_url("postgres://u@h/d").kind == "postgresql"
    target = parse_db_url("postgresql://u:secret@127.0.0.1:5432/test")
    assert "secret" not in target.redacted() and ":***@" in target.redacted()


def test_unreachable_postgres_is_one_line_error(tmp_path):
    # Port 1 on the loopback refuses at once; no network is involved.
    c = cfg(tmp_path, db_url="postgresql://postgres:pw@127.0.0.1:1/test")
    with pytest.raises(AdabatchError) as info:
        get_workload("reduce").check(c)
    text = str(info.value)
    assert text.startswith("cannot reach database postgresql://postgres:***@127.0.0.1:1/test")
    assert "\n" not in text and "pw" not in text


def test_sqlite_in_missing_directory_is_an_error(tmp_path):
    c = cfg(tmp_path, db_url=f"sqlite:///{tmp_path}/nope/r.db")
    with pytest.raises(AdabatchError, match=r"directory .*nope' does not exist"):
        get_workload("reduce").check(c)


def test_config_of_another_workload_is_refused(tmp_path):
    with pytest.raises(AdabatchError, match="workload 'join' was given the config of workload"):
        get_workload("join").check(cfg(tmp_path))


def test_transaction_rolls_back_on_error(tmp_path):
    db = Database(f"sqlite:///{tmp_path}/t.db", "x_")
    db.ensure_tables(())
    with pytest.raises(RuntimeError), db.transaction() as cur:
        cur.execute("INSERT INTO {p}batches (run_id, query, batch_id) VALUES ('r', 'q', 1)")
        raise RuntimeError("boom")
    assert db.query("SELECT count(*) FROM {p}batches") == [(0,)]
    db.close()


def _partial(batch_id, end_us, pairs):
    keys = np.array([k for k, _ in pairs], dtype=np.int64)
    return Partial(
        batch_id,
        end_us,
        keys,
        np.ones(len(pairs), dtype=np.int64),
        np.array([v for _, v in pairs], dtype=np.float64),
    )


batches_st = st.lists(
    st.tuples(
        st.integers(0, 30_000_000),  # end time step, µs
        st.lists(st.tuples(st.integers(0, 5), st.integers(-8, 8)), min_size=1, max_size=6),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(batches=batches_st, window_s=st.sampled_from([0.5, 5.0, 20.0]))
def test_sliding_window_equals_brute_force(batches, window_s):
    window_us = round(window_s * 1e6)
    window = SlidingWindow(window_us)
    end = 0
    history = []
    for i, (step, pairs) in enumerate(batches):
        end += step
        history.append((end, pairs))
        window, expired = window.add(_partial(i, end, pairs))
        newest = max(e for e, _ in history)
        expected: dict[int, tuple[int, float]] = {}
        for e, ps in history:
            if e > newest - window_us:
                for k, v in ps:
                    n, s = expected.get(k, (0, 0.0))
                    expected[k] = (n + 1, s + v)
        got = window.totals()
        assert (
            dict(
                zip(
                    got.keys.tolist(),
                    zip(got.records.tolist(), got.value_sums.tolist(), strict=True),
                    strict=True,
                )
            )
            == expected
        )
        assert got.end_us == newest
        assert all(p.end_us <= newest - window_us for p in expired)
        assert len(window.partials) == sum(e > newest - window_us for e, _ in history)


def test_empty_batch_leaves_the_window_unchanged():
    w, _ = SlidingWindow(1_000_000).add(_partial(0, 5, [(1, 2.0)]))
    w2, expired = w.add(None)
    assert w2 == w and expired == ()
    assert SlidingWindow(10).add(None) == (SlidingWindow(10), ())


def test_names_are_the_simulators():
    from adabatch.sim.workloads import WORKLOADS

    assert tuple(WORKLOADS) == WORKLOAD_NAMES
