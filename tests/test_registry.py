"""The one registry shape: order, lazy import, errors that list the names."""

from __future__ import annotations

import pytest

from adabatch import cli
from adabatch.control.registry import CONTROLLERS
from adabatch.errors import AdabatchError
from adabatch.registry import Registry
from adabatch.sources import SOURCES
from adabatch.workloads import WORKLOADS, get_workload


def test_entries_import_on_use_and_keep_their_order() -> None:
    reg: Registry[object] = Registry("thing", {"b": "json:dumps", "a": "math:pi"})
    assert reg.names() == ["b", "a"]
    assert reg.get("a") == pytest.approx(3.14159, abs=1e-5)
    assert "a" in reg and "c" not in reg and 3 not in reg


def test_unknown_names_list_what_is_allowed() -> None:
    reg: Registry[object] = Registry("thing", {"b": "json:dumps", "a": "math:pi"})
    with pytest.raises(AdabatchError, match=r"unknown thing 'c': allowed b, a"):
        reg.get("c")


def test_a_missing_module_breaks_only_its_own_name() -> None:
    reg: Registry[object] = Registry("thing", {"gone": "adabatch.nowhere:X", "ok": "math:e"})
    assert reg.available() == ["ok"]
    with pytest.raises(AdabatchError, match=r"gone.*not installed"):
        reg.get("gone")
    assert reg.get("ok") > 2.7


def test_malformed_targets_are_refused_when_registered() -> None:
    with pytest.raises(ValueError, match="module:attribute"):
        Registry("thing", {"x": "math.pi"})


def test_every_registry_of_the_package_names_what_it_loads() -> None:
    for name in CONTROLLERS.names():
        assert CONTROLLERS.get(name).name == name
    for name in SOURCES.names():
        assert SOURCES.get(name).name == name
    for name in WORKLOADS.names():
        assert get_workload(name).name == name
    for name in cli.COMMANDS.names():
        assert cli.COMMANDS.get(name).name == name


def test_the_command_line_lists_the_commands_in_registry_order() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices) == cli.COMMANDS.names()
    assert cli.COMMANDS.names() == [
        "controllers",
        "simulate",
        "pid-sweep",
        "deadline",
        "run",
        "compare",
        "produce",
        "cluster",
        "bench",
    ]
