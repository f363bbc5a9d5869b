"""``adabatch controllers``: every controller with its parameters, defaults and ranges."""

from __future__ import annotations

import argparse
import json

from adabatch.commands import Command
from adabatch.control import registry

NAME = "controllers"
HELP = "list every controller with its parameters, defaults and allowed ranges"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def catalogue() -> list[dict]:
    """One entry per controller: name, summary and parameters."""
    out = []
    for name in registry.names():
        cls = registry.controller_class(name)
        params = [
            {
                "name": p.name,
                "default": p.default,
                "required": p.required,
                "allowed": p.allowed(),
                "help": p.help,
            }
            for p in cls.PARAMS
        ]
        out.append({"name": name, "summary": cls.summary, "params": params})
    return out


def run(args: argparse.Namespace) -> int:
    entries = catalogue()
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    for entry in entries:
        print(f"{entry['name']}: {entry['summary']}")
        for p in entry["params"]:
            default = "unset" if p["default"] is None else p["default"]
            default = "required" if p["required"] else default
            print(f"    {p['name']:<16} default {default!s:<10} {p['allowed']:<24} {p['help']}")
        print()
    return 0


COMMAND = Command(NAME, HELP, add_arguments, run)
