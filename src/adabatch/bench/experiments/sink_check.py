"""After a reduce run on the generator: does the sink hold exactly the first ``N`` records
the generator made, each once (``N`` the records it committed)? Nothing lost between them,
nothing counted twice. The answer goes to :data:`SINK_FILE` in the run's directory when
the run ends, so it outlives the database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adabatch.bench.experiments.live_producer import db_totals
from adabatch.bench.model import Config, Outcome
from adabatch.outputs import dumps_json, write_atomic
from adabatch.runs.produce import generator_totals

SINK_FILE = "sink.json"


def check_sink(config: Config, run_dir: Path, seed: int) -> dict[str, Any]:
    """The run's committed per-key totals against the generator's first records."""
    committed = db_totals(run_dir)
    n = sum(records for records, _ in committed.values())
    made = generator_totals(
        config.profile, n, seed=seed, keys=config.keys, source_options=config.source_options
    )
    wrong = sorted(k for k in set(committed) | set(made) if committed.get(k) != made.get(k))
    return {"committed": n, "exactly_once": n > 0 and not wrong, "mismatched_keys": len(wrong)}


class SinkCheck:
    """A run hook: :func:`check_sink` once the run is over, written to :data:`SINK_FILE`."""

    def __init__(self, config: Config, run_dir: Path, seed: int) -> None:
        self.config, self.run_dir, self.seed = config, run_dir, seed

    def update(self, stream_s: float) -> None:
        pass

    def close(self) -> None:
        result = check_sink(self.config, self.run_dir, self.seed)
        text = dumps_json(result, indent=2) + "\n"
        write_atomic(self.run_dir / SINK_FILE, text.encode("utf-8"))


def read_sink(outcome: Outcome) -> dict[str, Any]:
    """A run's :data:`SINK_FILE` (empty if it has none)."""
    path = outcome.dir / SINK_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
