"""Continuing a bench: the one rule both benches resume by.

A piece of finished work is reused only when the settings it was recorded with equal this
run's on the keys that decide its numbers; anything else runs again. ``adabatch bench``
reuses a finished config run (``CONFIG/config.json`` equal on every key, its
``summary.json`` complete); ``adabatch deadline bench --resume`` keeps the rows of
``results.json`` when the data settings, margin and profile sizes are the same, and
refuses to mix otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from adabatch.errors import AdabatchError
from adabatch.outputs import remove_tree

MARKER = "bench.json"
"""Written into every experiment directory ``adabatch bench`` creates."""


def first_difference(
    before: Mapping[str, Any], now: Mapping[str, Any], keys: Iterable[str]
) -> str | None:
    """The first of ``keys`` on which the recorded settings ``before`` differ from
    ``now``; ``None`` when they agree."""
    return next((k for k in keys if before.get(k) != now.get(k)), None)


def as_json(value: Any) -> Any:
    """``value`` as it reads back from a JSON file (tuples as lists, paths as strings)."""
    return json.loads(json.dumps(value, default=str))


def finished_summary(run_dir: Path, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The summary of a finished run of ``config`` in ``run_dir`` (for ``--resume``):
    ``None`` when it is missing, was run with other settings, or was interrupted."""
    cfg_file, summary_file = run_dir / "config.json", run_dir / "summary.json"
    if not (cfg_file.is_file() and summary_file.is_file()):
        return None
    if json.loads(cfg_file.read_text(encoding="utf-8")) != as_json(config):
        return None
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    return None if summary.get("interrupted") else summary


def previous_results(
    path: Path, now: Mapping[str, Any], keys: Iterable[str]
) -> dict[str, Any] | None:
    """The results file ``path`` to continue from (``None``: none there, start afresh),
    checked to have been run with the same ``keys`` of its ``config`` as ``now``."""
    if not path.is_file():
        return None
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
        before = results["config"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        msg = f"--resume: {str(path)!r} is not a bench result ({exc!r}); use another --out"
        raise AdabatchError(msg) from None
    keys = list(keys)
    key = first_difference(before, now, keys)
    if key is not None:
        msg = (
            f"--resume: {str(path)!r} was run with {key} = {before.get(key)!r}, this run "
            f"has {now[key]!r}; allowed the same {', '.join(keys)} (or another --out)"
        )
        raise AdabatchError(msg)
    return results


def prepare_dir(exp_dir: Path, *, force: bool, resume: bool) -> None:
    """Create the experiment directory; refuse to mix with an earlier run unless
    ``resume`` (reuse finished configs) or ``force`` (delete it: only a directory with
    our marker file)."""
    if exp_dir.exists() and any(exp_dir.iterdir()):
        if resume:
            return
        if not force:
            msg = (
                f"{str(exp_dir)!r} already holds results: use another --out, --resume to "
                "continue it, or --force to replace it"
            )
            raise AdabatchError(msg)
        if not (exp_dir / MARKER).is_file():
            msg = f"--force: {str(exp_dir)!r} was not written by adabatch bench; not deleting"
            raise AdabatchError(msg)
        remove_tree(exp_dir, inside=exp_dir.parent, what="--force: experiment directory")
    exp_dir.mkdir(parents=True, exist_ok=True)  # the runner writes the marker next
