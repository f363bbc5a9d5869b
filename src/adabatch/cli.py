"""The ``adabatch`` command: parses, calls the library, prints. One module per subcommand.

Each module in :mod:`adabatch.commands` defines ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from adabatch.errors import AdabatchError

COMMANDS = ("controllers", "simulate", "pid_sweep", "deadline", "run", "compare", "bench")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="adabatch",
        description="Spark streaming jobs that choose their own batch sizes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMANDS:
        module = importlib.import_module(f"adabatch.commands.{module_name}")
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input exits 2 with one line on stderr and no traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except AdabatchError as exc:
        print(f"adabatch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("adabatch: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
