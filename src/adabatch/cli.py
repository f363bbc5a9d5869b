"""The ``adabatch`` command: parses, calls the library, prints. One module per subcommand.

Each module in :mod:`adabatch.commands` ends with its ``COMMAND``
(:class:`~adabatch.commands.Command`: name, help, ``add_arguments(parser)`` and
``run(args) -> int``); :data:`COMMANDS` lists them in ``adabatch --help`` order.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from adabatch.commands import Command
from adabatch.errors import MAX_SHOWN, AdabatchError, shown
from adabatch.registry import Registry

COMMANDS: Registry[Command] = Registry(
    "command",
    {
        "controllers": "adabatch.commands.controllers:COMMAND",
        "simulate": "adabatch.commands.simulate:COMMAND",
        "pid-sweep": "adabatch.commands.pid_sweep:COMMAND",
        "deadline": "adabatch.commands.deadline:COMMAND",
        "run": "adabatch.commands.run:COMMAND",
        "compare": "adabatch.commands.compare:COMMAND",
        "produce": "adabatch.commands.produce:COMMAND",
        "cluster": "adabatch.commands.cluster:COMMAND",
        "bench": "adabatch.commands.bench:COMMAND",
    },
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="adabatch",
        description="Spark streaming jobs that choose their own batch sizes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS.names():
        command = COMMANDS.get(name)
        cmd = sub.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(cmd)
        cmd.set_defaults(_run=command.run)
    return parser


# Set to 1 to let an unexpected error end in its Python traceback (for a bug report).
DEBUG_ENV = "ADABATCH_DEBUG"
ISSUES_HINT = "please report it with the command line (ADABATCH_DEBUG=1 shows the traceback)"


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input exits 2 with one line on stderr and no traceback; an
    internal error exits 1 with one line and a hint to report it."""
    parser = build_parser()
    args = parser.parse_args(argv)  # usage errors: argparse's own message, exit 2
    show_warnings()
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("adabatch: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        line, status = describe_failure(exc)
        print(f"adabatch: error: {line}", file=sys.stderr)
        return status


class _OneLine(logging.Formatter):
    """``adabatch: warning: message``, never a traceback."""

    def __init__(self) -> None:
        super().__init__("adabatch: warning: %(message)s")

    def formatException(self, ei: object) -> str:
        return ""

    def formatStack(self, stack_info: str) -> str:
        return ""


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (tests replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def show_warnings() -> None:
    """Warnings of adabatch's loggers (a latency target out of reach) as one line each on
    stderr; once per process, and still propagated (pytest's caplog sees them)."""
    log = logging.getLogger("adabatch")
    if any(isinstance(h.formatter, _OneLine) for h in log.handlers):
        return
    handler = _Stderr()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_OneLine())
    log.addHandler(handler)
    if log.level == logging.NOTSET:
        log.setLevel(logging.WARNING)


def describe_failure(exc: BaseException) -> tuple[str, int]:
    """One line for ``exc`` and the exit status: 2 for what the input or the machine
    caused (bad values, files, numbers out of range, nesting, memory), 1 for a bug."""
    if isinstance(exc, AdabatchError):
        return str(exc), 2
    if isinstance(exc, UnicodeDecodeError):
        return f"input is not UTF-8 text (byte {exc.start}): allowed UTF-8 files", 2
    if (
        isinstance(exc, ModuleNotFoundError)
        and exc.name
        and exc.name.split(".")[0]
        in (
            "pyspark",
            "pyarrow",
            "py4j",
        )
    ):
        return (
            f"this command needs the spark extra ({exc.name} is not installed): "
            "pip install 'adabatch[spark]'",
            2,
        )
    if isinstance(exc, OSError):
        what = exc.strerror or type(exc).__name__
        names = [n for n in (exc.filename, exc.filename2) if n is not None]
        where = " -> ".join(shown(str(n)) for n in names)
        return (f"{where}: {what}" if where else one_line(f"{what}: {exc}")), 2
    if isinstance(exc, ArithmeticError):
        return (
            f"a value is too large or too small to compute with ({type(exc).__name__}: "
            f"{one_line(str(exc))}): use values of a sensible magnitude",
            2,
        )
    if isinstance(exc, RecursionError):
        return "input nested too deeply to read: allowed a flatter file", 2
    if isinstance(exc, MemoryError):
        return "out of memory: the input asks for more than this machine has; use smaller sizes", 2
    return f"internal error ({type(exc).__name__}: {one_line(str(exc))}); {ISSUES_HINT}", 1


def one_line(text: str) -> str:
    """``text`` on one line, clipped to ``MAX_SHOWN`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_SHOWN else flat[: MAX_SHOWN - 3] + "..."


if __name__ == "__main__":
    sys.exit(main())
