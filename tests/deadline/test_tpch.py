"""TPC-H landing data: tpchgen-cli tables split into slots, the manifest, the feeder."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from adabatch.deadline.spark import tpch
from adabatch.errors import AdabatchError

SLOTS = 10
RATE = 20.0  # slots per second


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> tpch.Manifest:
    root = tmp_path_factory.mktemp("tpch")
    return tpch.prepare(root, scale_factor=0.01, slots=SLOTS, rate=RATE, window_start=5.0)


def test_tables_are_generated_at_the_scale_factor(manifest: tpch.Manifest) -> None:
    assert manifest.scale_factor == 0.01
    rows = {t: pq.read_metadata(manifest.table_path(t)).num_rows for t in tpch.ALL_TABLES}
    # TPC-H cardinalities at SF 0.01
    assert rows["orders"] == 15_000
    assert rows["customer"] == 1_500
    assert rows["part"] == 2_000
    assert rows["nation"] == 25
    assert rows["supplier"] == 100
    assert manifest.total("orders") == 15_000
    assert manifest.total("lineitem") == rows["lineitem"]


def test_slots_hold_contiguous_orderkeys_with_all_their_lineitems(
    manifest: tpch.Manifest,
) -> None:
    seen_orders: list[np.ndarray] = []
    seen_items = 0
    previous_hi = -1
    for slot in manifest.slots:
        orders = pq.read_table(manifest.staging_path(slot, "orders"))
        items = pq.read_table(manifest.staging_path(slot, "lineitem"))
        okeys = orders["o_orderkey"].to_numpy()
        lkeys = items["l_orderkey"].to_numpy()
        assert slot.orderkey_lo > previous_hi
        assert okeys.min() == slot.orderkey_lo and okeys.max() == slot.orderkey_hi
        assert set(np.unique(lkeys)) <= set(okeys)
        assert orders.num_rows == slot.tuples["orders"]
        assert items.num_rows == slot.tuples["lineitem"]
        assert slot.offsets["lineitem"] == seen_items
        # the slot's timestamp column is its arrival time
        ts = orders["ts"].cast("int64").to_numpy()
        assert set(ts.tolist()) == {tpch.TS_ORIGIN_US + round(slot.arrival_s * 1e6)}
        seen_orders.append(okeys)
        seen_items += items.num_rows
        previous_hi = slot.orderkey_hi
    all_items = pq.read_table(manifest.table_path("lineitem"))["l_orderkey"].to_numpy()
    assert seen_items == len(all_items)
    # an order's lineitems all sit in its slot: per-order counts match the full table
    for slot in manifest.slots[:3]:
        items = pq.read_table(manifest.staging_path(slot, "lineitem"))["l_orderkey"]
        keys = items.to_numpy()
        full = all_items[(all_items >= slot.orderkey_lo) & (all_items <= slot.orderkey_hi)]
        assert len(keys) == len(full)
    sizes = [s.tuples["orders"] for s in manifest.slots]
    assert max(sizes) - min(sizes) <= 1


def test_arrival_times_and_trace(manifest: tpch.Manifest) -> None:
    times = [s.arrival_s for s in manifest.slots]
    assert times[0] == 5.0
    assert manifest.window_end == pytest.approx(5.0 + (SLOTS - 1) / RATE)
    assert np.allclose(np.diff(times), 1 / RATE)
    trace = manifest.arrivals("lineitem")
    assert trace.total == manifest.total("lineitem")
    first = manifest.slots[0].tuples["lineitem"]
    assert trace.arrived(5.0) == first
    assert trace.input_time(first + 1) == pytest.approx(manifest.slots[1].arrival_s)
    assert manifest.slot_of("lineitem", first - 1) == 0
    assert manifest.slot_of("lineitem", first) == 1
    assert manifest.slot_of("lineitem", manifest.total("lineitem") - 1) == SLOTS - 1
    with pytest.raises(AdabatchError, match="outside the stream"):
        manifest.slot_of("lineitem", manifest.total("lineitem"))


def test_manifest_round_trip(manifest: tpch.Manifest) -> None:
    again = tpch.load_manifest(manifest.root)
    assert again == manifest
    data = json.loads((manifest.root / tpch.MANIFEST_NAME).read_text())
    assert data["totals"]["orders"] == 15_000
    assert len(data["slots"]) == SLOTS
    assert data["slots"][3]["files"]["lineitem"] == "lineitem/slot-00003.parquet"


def test_feeder_releases_due_slots_and_resets(manifest: tpch.Manifest) -> None:
    feeder = tpch.Feeder(manifest, tpch.StreamClock.starting_now(manifest.window_start))
    feeder.reset()
    assert feeder.landed_slots() == []
    assert feeder.release_until(manifest.slots[3].arrival_s) == 4
    assert feeder.landed_slots() == [0, 1, 2, 3]
    assert not manifest.staging_path(manifest.slots[2], "orders").exists()
    feeder.reset()
    assert feeder.landed_slots() == []
    assert manifest.staging_path(manifest.slots[2], "orders").exists()


def test_feeder_thread_releases_in_real_time(manifest: tpch.Manifest) -> None:
    clock = tpch.StreamClock(manifest.window_start, time.monotonic() + 0.1, time_scale=1.0)
    feeder = tpch.Feeder(manifest, clock)
    feeder.reset()
    feeder.start()
    window_s = 0.1 + (SLOTS - 1) / RATE
    give_up = time.monotonic() + window_s + 60.0  # a loaded machine may be slow; not a timing test
    try:
        while not feeder.done and time.monotonic() < give_up:
            time.sleep(0.01)
    finally:
        feeder.stop()
    assert feeder.done
    assert feeder.landed_slots() == list(range(SLOTS))
    for slot in manifest.slots:
        assert feeder.released[slot.index] >= slot.arrival_s - 1e-6
    feeder.reset()


def test_clock_maps_spec_time_to_real_time() -> None:
    clock = tpch.StreamClock(origin=10.0, t0=100.0, time_scale=0.5)
    assert clock.real(12.0) == 101.0
    assert clock.spec(101.0) == 12.0
    with pytest.raises(AdabatchError, match="time_scale"):
        tpch.StreamClock(0.0, 0.0, time_scale=0.0)


def test_bad_inputs_are_clear_errors(tmp_path, manifest: tpch.Manifest) -> None:
    with pytest.raises(AdabatchError, match="scale factor"):
        tpch.generate_tables(-1, tmp_path / "t")
    with pytest.raises(AdabatchError, match=r"manifest\.json is missing"):
        tpch.load_manifest(tmp_path)
    with pytest.raises(AdabatchError, match="slots = 1"):
        tpch.build_landing(manifest.root, slots=1, rate=1.0)
    with pytest.raises(AdabatchError, match="rate"):
        tpch.build_landing(manifest.root, slots=4, rate=0.0)
    with pytest.raises(AdabatchError, match="not a TPC-H table"):
        manifest.table_path("region2")
    with pytest.raises(AdabatchError, match="not a landing stream"):
        manifest.total("part")
