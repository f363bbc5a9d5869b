"""Batch-sizing controllers: pure Python, no Spark, no I/O; one module per algorithm."""

from adabatch.control.base import BatchPlan, BatchReport, Controller
from adabatch.control.registry import controller_class, create, names, parse_params
from adabatch.params import Param, Params

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
