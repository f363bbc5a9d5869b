"""The trigger guard: a controller does not run under a processingTime or realTime trigger.

A controller cuts the batches on its own schedule and Spark's default trigger asks for the
next one as soon as the last has finished. A ``processingTime`` trigger (above 0) asks only
every interval and a ``realTime`` trigger runs long batches of its own duration, so either
would fight the controller. With ``spark-default`` or ``mode=advise`` Spark's trigger
decides anyway, and every trigger is fine.

The source's reader runs in a Python process that the JVM starts; nothing there tells it the
query's trigger. The driver knows it: Spark calls a ``StreamingQueryListener``'s
``onQueryStarted`` in the query's own thread, before ``start()`` returns and before the
query creates its sources (``StreamExecution.runStream``, verified on PySpark 4.3). So
:class:`TriggerGuard`, installed in the driver by :func:`install` (``adabatch.read_stream``
does it), reads the trigger and the ``adabatch`` sources' options from the query and, for a
refused pair, writes the verdict into a directory of this Spark driver (named after the
JVM's process id) under the source's options key. The source's reader, a child process of
that JVM, looks there once, before its first ``latestOffset`` (:func:`check`), and raises
the verdict as an :class:`AdabatchError`, which fails the query with that one line. An
allowed start removes any verdict for the same options, and a query's end removes its own.

Limits: only a driver where :func:`install` ran is guarded (a query of a process that
never imported adabatch runs unguarded); two queries of one driver with identical source
options share a key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from adabatch.errors import AdabatchError
from adabatch.outputs import write_atomic
from adabatch.streaming.options import SPARK_DEFAULT, StreamOptions, parse_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Spark's trigger classes a controller refuses, and their names in DataStreamWriter.trigger
REFUSED = {"ProcessingTimeTrigger": "processingTime", "RealTimeTrigger": "realTime"}

log = logging.getLogger(__name__)


def refusal(options: StreamOptions, trigger: str, duration_ms: int) -> str | None:
    """The error line for a source with ``options`` under Spark's trigger class ``trigger``
    (``"ProcessingTimeTrigger"``, ...) of ``duration_ms``; ``None`` if they go together."""
    name = REFUSED.get(trigger)
    if name is None or options.spark_default or options.advise:
        return None
    if name == "processingTime" and duration_ms <= 0:
        return None  # processingTime 0 is Spark's default trigger
    return (
        f"trigger {name}='{duration_ms} ms' fights controller {options.controller!r}, which "
        "cuts the batches itself: with a controller use the default trigger or "
        f"availableNow; for {name} use controller {SPARK_DEFAULT!r} or mode 'advise'"
    )


def options_key(options: StreamOptions) -> str:
    """Which source a verdict is for: a digest of all its options."""
    text = json.dumps(sorted(options.to_options().items()), separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def verdict_dir(jvm_pid: int) -> Path:
    """The verdicts of the Spark driver whose JVM has process id ``jvm_pid``."""
    user = getattr(os, "getuid", lambda: "user")()
    return Path(tempfile.gettempdir()) / f"adabatch-trigger-guard-{user}-{int(jvm_pid)}"


def _own_dir(path: Path) -> bool:
    """``path`` is a directory of this user (another user's could plant verdicts)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    getuid = getattr(os, "getuid", None)
    return path.is_dir() and not path.is_symlink() and (getuid is None or st.st_uid == getuid())


def write_verdict(jvm_pid: int, key: str, run_id: str, message: str) -> Path:
    """Record that the source ``key`` of query run ``run_id`` must fail with ``message``."""
    folder = verdict_dir(jvm_pid)
    folder.mkdir(mode=0o700, exist_ok=True)
    if not _own_dir(folder):
        msg = f"trigger guard directory {str(folder)!r} is not this user's directory"
        raise AdabatchError(msg)
    body = json.dumps({"run_id": run_id, "message": message})
    return write_atomic(folder / f"{key}.json", body.encode("utf-8"))


def clear_verdict(jvm_pid: int, key: str, run_id: str | None = None) -> None:
    """Remove the verdict for ``key`` (only if written for ``run_id``, when given)."""
    path = verdict_dir(jvm_pid) / f"{key}.json"
    if not _own_dir(path.parent) or not path.exists():
        return
    if run_id is not None and _read(path).get("run_id") != run_id:
        return
    path.unlink(missing_ok=True)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        msg = f"trigger guard verdict {str(path)!r} is unreadable ({exc}): delete it"
        raise AdabatchError(msg) from None
    if not isinstance(data, dict) or not isinstance(data.get("message"), str):
        msg = f"trigger guard verdict {str(path)!r} was not written by adabatch: delete it"
        raise AdabatchError(msg)
    return data


def check(options: StreamOptions, jvm_pid: int | None = None) -> None:
    """In the source's reader: raise the driver's verdict on this source's trigger, if any.

    ``jvm_pid`` defaults to the parent process, the JVM that started the reader."""
    folder = verdict_dir(os.getppid() if jvm_pid is None else jvm_pid)
    path = folder / f"{options_key(options)}.json"
    if _own_dir(folder) and path.exists():
        raise AdabatchError(_read(path)["message"])


class TriggerGuard(StreamingQueryListener):
    """Writes the verdict on each starting query's ``adabatch`` sources (module docstring).

    A listener that raises makes Spark fail the query with an unrelated error (measured on
    PySpark 4.3: ``NoClassDefFoundError``), so a guard that cannot inspect a query logs a
    warning and lets it run unguarded."""

    def __init__(self, spark: SparkSession, jvm_pid: int) -> None:
        self._spark = spark
        self._jvm_pid = jvm_pid
        self._written: dict[str, list[str]] = {}  # run id -> keys with a verdict

    def onQueryStarted(self, event: Any) -> None:
        try:
            self._judge(str(event.id), str(event.runId))
        except Exception as exc:  # see the class docstring
            log.warning("adabatch trigger guard could not inspect query %s: %s", event.id, exc)

    def _judge(self, query_id: str, run_id: str) -> None:
        query = self._spark.streams.get(query_id)
        if query is None:
            return
        execution = query._jsq.streamingQuery()
        trigger = execution.trigger()
        kind = str(trigger.getClass().getSimpleName()).rstrip("$")
        duration_ms = 0
        if kind == "ProcessingTimeTrigger":
            duration_ms = int(trigger.intervalMs())
        elif kind == "RealTimeTrigger":
            duration_ms = int(trigger.batchDurationMs())
        for options in self._sources(execution.analyzedPlan()):
            key = options_key(options)
            message = refusal(options, kind, duration_ms)
            if message is None:
                clear_verdict(self._jvm_pid, key)
            else:
                write_verdict(self._jvm_pid, key, run_id, message)
                self._written.setdefault(run_id, []).append(key)

    @staticmethod
    def _sources(plan: Any) -> list[StreamOptions]:
        """The options of every ``adabatch`` source in a query's analyzed plan."""
        from adabatch.streaming.source import FORMAT  # source -> reader -> guard

        out = []
        leaves = plan.collectLeaves().iterator()
        while leaves.hasNext():
            leaf = leaves.next()
            if str(leaf.nodeName()) != "StreamingRelationV2" or str(leaf.sourceName()) != FORMAT:
                continue
            with warnings.catch_warnings():  # load() already warned about old option names
                warnings.simplefilter("ignore", DeprecationWarning)
                out.append(parse_options(dict(leaf.extraOptions().asCaseSensitiveMap())))
        return out

    def onQueryProgress(self, event: Any) -> None:
        return None

    def onQueryIdle(self, event: Any) -> None:
        return None

    def onQueryTerminated(self, event: Any) -> None:
        run_id = str(event.runId)
        for key in self._written.pop(run_id, []):
            try:
                clear_verdict(self._jvm_pid, key, run_id)
            except Exception as exc:  # see the class docstring
                log.warning("adabatch trigger guard could not clear a verdict: %s", exc)


def install(spark: SparkSession) -> TriggerGuard | None:
    """Add the :class:`TriggerGuard` to ``spark``'s queries (once per session); ``None``,
    with a warning, where this process has no JVM to ask (Spark Connect)."""
    guard = getattr(spark, "_adabatch_trigger_guard", None)
    if guard is not None:
        return guard
    try:
        jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    except AttributeError as exc:  # pyspark's PySparkAttributeError on Spark Connect
        log.warning("adabatch trigger guard not installed, queries run unguarded: %s", exc)
        return None
    guard = TriggerGuard(spark, jvm_pid)
    spark.streams.addListener(guard)
    spark._adabatch_trigger_guard = guard  # type: ignore[attr-defined]
    return guard
