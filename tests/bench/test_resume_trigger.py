"""A resumed processingTime trigger run is analysed with the processing times its fresh
run had (Spark's durations), not the intervals its source saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adabatch.bench.model import Config
from adabatch.bench.runner import _config_dict, _load_outcome
from adabatch.errors import AdabatchError
from adabatch.metrics import REQUIRED_SUMMARY_FIELDS, BatchRecord, write_jsonl
from adabatch.runs.source_spec import GENERATOR
from adabatch.runs.spark_job import PROGRESS_FILE


def _run_dir(tmp_path: Path, config: Config, *, progress: bool) -> Path:
    """A finished 1 s trigger run of two batches that Spark processed in 0.3 and 0.4 s."""
    run = tmp_path / config.name
    run.mkdir()
    (run / "config.json").write_text(json.dumps(_config_dict(config, GENERATOR)))
    summary: dict[str, object] = dict.fromkeys(REQUIRED_SUMMARY_FIELDS, 1.0)
    summary.update(controller="spark-default", workload="reduce", profile="constant:1000")
    summary["stable"] = True
    (run / "summary.json").write_text(json.dumps(summary))
    seen = [  # the source sees each batch end at the next trigger: processing = interval
        BatchRecord(i, 1.0, 2, n, 1.0, 0.0, 1.0 + i, 1.0 + i, 2.0 + i, 2.0, 1.5, n)
        for i, n in enumerate((1000, 1200))
    ]
    write_jsonl(run / "metrics.jsonl", seen)
    if progress:
        lines = [
            {"durationMs": {"triggerExecution": ms},
             "sources": [{"startOffset": {"offset": a}, "endOffset": {"offset": b}}]}
            for ms, a, b in ((300, 0, 1000), (400, 1000, 2200))
        ]  # fmt: skip
        (run / PROGRESS_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run


def test_a_resumed_trigger_run_has_sparks_processing_times(tmp_path: Path) -> None:
    config = Config("t", workload="reduce", controller="spark-default", profile="constant:1000",
                    duration_s=2.0, trigger="processingTime:1s")  # fmt: skip
    assert config.role == "trigger"
    outcome = _load_outcome(config, _run_dir(tmp_path, config, progress=True))
    assert outcome is not None
    assert [r.processing_s for r in outcome.records] == pytest.approx([0.3, 0.4])
    assert [r.latency_s for r in outcome.records] == pytest.approx([1.3, 1.4])


def test_a_trigger_run_without_its_progress_log_is_refused(tmp_path: Path) -> None:
    config = Config("t", workload="reduce", controller="spark-default", profile="constant:1000",
                    duration_s=2.0, trigger="processingTime:1s")  # fmt: skip
    with pytest.raises(AdabatchError, match=PROGRESS_FILE):
        _load_outcome(config, _run_dir(tmp_path, config, progress=False))
