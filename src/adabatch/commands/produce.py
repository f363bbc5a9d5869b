"""``adabatch produce``: the generator's records written in real time into a landing
directory or a Redis Stream, for ``adabatch run --source files:DIR|redis://...`` to read."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from adabatch.commands import Command
from adabatch.commands.args import parse_choice, parse_int
from adabatch.control.registry import parse_params
from adabatch.errors import AdabatchError
from adabatch.profiles import GRAMMAR, parse_duration
from adabatch.runs.produce import (
    MAX_MAXLEN,
    ProduceProgress,
    check_file_every,
    check_produce_inputs,
    produce,
)
from adabatch.runs.source_spec import FORMATS, TARGET_FORMS, SourceSpec, parse_target

NAME = "produce"
HELP = "write the generator's records in real time into a landing directory or a Redis Stream"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", required=True, help=TARGET_FORMS)
    parser.add_argument("--profile", required=True, help=f"rate profile: {GRAMMAR}")
    parser.add_argument("--duration", required=True, help="wall time to produce for (60s, 10m)")
    parser.add_argument("--format", help=f"files: {', '.join(FORMATS)} (default json lines)")
    parser.add_argument("--file-every", help="files: one file per this much time (default 1s)")
    parser.add_argument("--maxlen", help="redis: trim the stream to about this many entries")
    parser.add_argument("--seed", default="0", help="generator seed (integer >= 0)")
    parser.add_argument("--keys", default="1000", help="distinct keys of the generator")
    parser.add_argument(
        "--source-option",
        action="append",
        metavar="K=V",
        help="generator option, e.g. distribution=zipf",
    )


def _target_options(args: argparse.Namespace, target: SourceSpec) -> dict[str, object]:
    """``--format``/``--file-every`` (files) or ``--maxlen`` (redis), checked; an option of
    the other kind of target is refused."""
    if target.name == "files":
        if args.maxlen is not None:
            msg = f"--maxlen applies to a Redis Stream, not to {target.shown}"
            raise AdabatchError(msg)
        every = "1s" if args.file_every is None else args.file_every
        return {
            "file_format": parse_choice(args.format or "json", "--format", FORMATS),
            "file_every_s": check_file_every(parse_duration(every)),
        }
    for flag, value in (("--format", args.format), ("--file-every", args.file_every)):
        if value is not None:
            msg = f"{flag} applies to files:DIR, not to {target.shown}"
            raise AdabatchError(msg)
    if args.maxlen is None:
        return {"maxlen": None}
    maxlen = parse_int(args.maxlen, "--maxlen", 1)
    if maxlen > MAX_MAXLEN:
        msg = f"--maxlen {maxlen} is not allowed: allowed 1 to {MAX_MAXLEN}"
        raise AdabatchError(msg)
    return {"maxlen": maxlen}


def _require(target: SourceSpec) -> None:
    """The modules the producer needs (from the ``spark`` extra), or one line."""
    for module in ("pyarrow", "redis") if target.name == "redis" else ("pyarrow",):
        try:
            __import__(module)
        except ImportError:
            msg = (
                f"adabatch produce needs the spark extra ({module} is not installed): "
                "pip install 'adabatch[spark]'"
            )
            raise AdabatchError(msg) from None


@contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """An event the first Ctrl-C sets (the producer finishes the file in hand and stops);
    a second Ctrl-C interrupts at once. Outside the main thread: just the event."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_sigint(signum: int, frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def run(args: argparse.Namespace) -> int:
    target = parse_target(args.to)
    options = _target_options(args, target)
    seed = parse_int(args.seed, "--seed", 0)
    keys = parse_int(args.keys, "--keys", 1)
    duration_s = parse_duration(args.duration)
    check_produce_inputs(args.profile, duration_s, seed=seed)
    _require(target)
    with stop_on_interrupt() as stop, ProduceProgress() as line:
        result = produce(
            target,
            args.profile,
            duration_s,
            seed=seed,
            keys=keys,
            source_options=parse_params(args.source_option),
            on_progress=line,
            stop=stop,
            **options,  # type: ignore[arg-type]
        )
    print(result.summary_line())
    return 130 if result.interrupted else 0


COMMAND = Command(NAME, HELP, add_arguments, run)
