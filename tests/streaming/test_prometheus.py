"""The Prometheus extra on real Spark: the driver serves the gauges of a running query,
scraped over HTTP while the query runs, and drops them when it ends."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from adabatch.api import export_prometheus, read_stream
from adabatch.errors import AdabatchError
from adabatch.streaming.progress import drain_events

pytestmark = pytest.mark.spark
prometheus_client = pytest.importorskip("prometheus_client")

QUERY = "prom_gauges"
INTERVAL_S = 0.5
RATE = 2000
WAIT_S = 60.0  # give up on the first batches after this long (a stuck query)


@pytest.fixture(scope="module")
def spark():
    from adabatch.spark import get_spark

    return get_spark("local[2]")


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` as {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode("utf-8")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def ours(samples, name: str, source: bool = True) -> float | None:
    labels = (("query", QUERY), ("source", "0")) if source else (("query", QUERY),)
    return samples.get((name, labels))


def start(spark, tmp_path, controller: str, params: dict):
    """A query named ``QUERY`` reading the generator under ``controller`` into noop."""
    df = read_stream(
        spark, controller=controller, params=params, profile=f"constant:{RATE}", keys=100
    )
    return (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .queryName(QUERY)
        .start()
    )


def scrape_until(port: int, query, seen) -> dict:
    """Scrape ``port`` until ``seen(samples)`` holds, while ``query`` runs; the samples."""
    deadline = time.monotonic() + WAIT_S
    samples = scrape(port)
    while not seen(samples):
        assert query.isActive, query.exception()
        assert time.monotonic() < deadline, samples
        query.awaitTermination(0.2)
        samples = scrape(port)
    return samples


def test_gauges_are_served_during_a_run_and_dropped_after(spark, tmp_path):
    exporting = export_prometheus(spark, port=0)
    query = start(spark, tmp_path, "static", {"interval": INTERVAL_S, "blocks": 2})
    try:  # until a batch with records
        samples = scrape_until(exporting.port, query, lambda s: ours(s, "adabatch_batch_records"))
        assert query.isActive  # scraped during the run
    finally:
        query.stop()
    assert ours(samples, "adabatch_interval_seconds") == pytest.approx(INTERVAL_S, abs=0.01)
    assert ours(samples, "adabatch_blocks") == 2
    assert ours(samples, "adabatch_batch_records") == pytest.approx(RATE * INTERVAL_S, abs=2)
    assert ours(samples, "adabatch_queue_records") >= 0
    assert 0 <= ours(samples, "adabatch_queue_delay_seconds") < 60
    assert 0 < ours(samples, "adabatch_processing_seconds", source=False) < 60
    # no controller has a latency target: no target series
    assert not [k for k in samples if k[0].startswith("adabatch_target")]
    # the query ended: its series are gone, the endpoint stays up until stop()
    assert drain_events(spark)
    assert not [k for k in scrape(exporting.port) if dict(k[1]).get("query") == QUERY]
    exporting.stop()
    with pytest.raises(urllib.error.URLError):
        scrape(exporting.port)


def test_a_latency_target_shows_in_last_progress_and_in_the_gauges(spark, tmp_path):
    exporting = export_prometheus(spark, port=0)
    query = start(spark, tmp_path, "slo", {"target": 4.0, "blocks": 2})
    try:
        samples = scrape_until(
            exporting.port,
            query,
            lambda s: ours(s, "adabatch_target_seconds", source=False) is not None,
        )
        end = query.lastProgress["sources"][0]["endOffset"]
    finally:
        query.stop()
        exporting.stop()
    target = json.loads(end)["target"] if isinstance(end, str) else end["target"]
    assert target["s"] == 4.0 and isinstance(target["met"], bool) and target["mode"]
    assert ours(samples, "adabatch_target_seconds", source=False) == 4.0
    assert ours(samples, "adabatch_target_met", source=False) in (0.0, 1.0)


def test_bad_port_is_one_line():
    from adabatch.streaming.prometheus import PrometheusExporter

    with pytest.raises(AdabatchError, match=r"port' = 70000 .*allowed integer in \[0, 65535\]"):
        PrometheusExporter().serve(70000)
