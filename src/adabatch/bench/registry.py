"""The experiments of ``adabatch bench``, by name, in the order they run and
``docs/results.md`` lists them (Experiment 1 to 12 of the module docstrings)."""

from __future__ import annotations

from adabatch.bench.model import Experiment
from adabatch.errors import AdabatchError
from adabatch.registry import Registry

_MODULES = (
    ("static-vs-adaptive", "static_vs_adaptive"),
    ("timeline", "timeline"),
    ("gradient", "gradient"),
    ("keys", "keys"),
    ("resources", "resources"),
    ("dybbs", "dybbs"),
    ("convergence", "convergence"),
    ("params", "params"),
    ("pid", "pid"),
    ("calibrate", "calibrate"),
    ("overhead", "overhead"),
    ("slo", "slo"),
)

EXPERIMENTS: Registry[Experiment] = Registry(
    "experiment",
    {name: f"adabatch.bench.experiments.{module}:EXPERIMENT" for name, module in _MODULES},
)


def names() -> list[str]:
    """Every registered experiment name, in order (Experiment 1 to 12)."""
    return EXPERIMENTS.names()


def get_experiment(name: str) -> Experiment:
    """The registered experiment ``name``; an :class:`AdabatchError` lists the known ones
    (and ``all``, which the command accepts too)."""
    if name not in EXPERIMENTS:
        msg = f"unknown experiment {name!r}: allowed all, {', '.join(names())}"
        raise AdabatchError(msg)
    try:
        experiment = EXPERIMENTS.get(name)
    except AttributeError:
        experiment = None
    if not isinstance(experiment, Experiment) or experiment.name != name:
        module, _ = EXPERIMENTS.target(name)
        msg = f"{module} must define EXPERIMENT, an Experiment named {name!r}"
        raise AdabatchError(msg)
    return experiment


def available() -> list[str]:
    """Registered experiments whose module exists (``bench all`` runs these)."""
    return EXPERIMENTS.available()
