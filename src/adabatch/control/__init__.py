"""Batch-sizing controllers: pure Python, no Spark, no I/O; one module per algorithm."""

from adabatch.control.base import BatchPlan, BatchReport, Controller, Param, Params
from adabatch.control.registry import controller_class, create, names, parse_params

__all__ = [
    "BatchPlan",
    "BatchReport",
    "Controller",
    "Param",
    "Params",
    "controller_class",
    "create",
    "names",
    "parse_params",
]
