"""The ``adabatch`` subcommands, one module each; every module ends with its ``COMMAND``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One subcommand: its name and help on the command line, how it adds its arguments
    to its parser, and what it runs (returning the exit status)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
