"""Batch cost models: seconds to process a batch of ``n`` tuples, and the inverse.

The deadline paper (Sec. 2.2, eq. 1; Sec. 6.2) prices a batch by a cost model fitted from
history: linear (a per-tuple cost plus a per-batch overhead), piecewise linear (what it
fits for TPC-H), or any other monotone function. The scheduler needs two questions answered:

- ``cost(n)``: seconds for one batch of ``n`` tuples (the paper's ``Cost(queryID, n)``);
- ``tuples_within(d)``: the most tuples one batch can process in ``d`` seconds
  (``EstimateTuplesProcessed(queryID, d)``).

Tuples are integers: ``tuples_within`` is the largest integer ``n >= 0`` with
``cost(n) <= d`` (up to :data:`TIME_EPS`), so fractional capacity is rounded down.

The final aggregation that combines a query's partial aggregates is priced separately by
:class:`AggregationCost` as a function of the number of batches (Sec. 6.2).

JSON form (``to_json``/:func:`cost_from_json`; ``adabatch deadline profile`` writes it)::

    {"kind": "linear", "per_tuple": 0.002, "overhead": 0.4}
    {"kind": "piecewise", "breakpoints": [[0, 0.4], [1000, 2.1], [5000, 7.9]]}
    {"kind": "expr", "expr": "0.4 + 0.003 * n ** 0.9"}
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations, pairwise
from typing import Any, Protocol, runtime_checkable

import numpy as np
from scipy.optimize import nnls

from adabatch.deadline.core.numbers import check_number
from adabatch.errors import AdabatchError, shown
from adabatch.params import Param

TIME_EPS = 1e-9
"""Seconds: two times closer than this are equal (float rounding, not a model parameter)."""

MAX_TUPLES = 2**53
"""Upper bound of ``tuples_within`` for models whose cost never exceeds the duration."""


def fits(cost_s: float, duration_s: float) -> bool:
    """``cost_s <= duration_s`` up to float rounding."""
    return cost_s <= duration_s + TIME_EPS * max(1.0, abs(duration_s))


@runtime_checkable
class QueryCost(Protocol):
    """Seconds for one batch of ``tuples`` tuples; non-decreasing in ``tuples``."""

    def cost(self, tuples: int) -> float: ...

    def tuples_within(self, duration_s: float) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


PER_TUPLE = Param("per_tuple", None, "a finite number", low=0.0, low_open=True)
"""Seconds per tuple of a linear model (> 0: a free tuple would make batches unbounded)."""
OVERHEAD = Param("overhead", 0.0, "a finite number", low=0.0)
"""Seconds per batch of a linear model, and a piecewise model's cost at 0 tuples."""
BREAKPOINT_TUPLES = Param("tuples", None, "a finite number", low=0.0)
BREAKPOINT_SECONDS = Param("seconds", None, "a finite number", low=0.0)
SEGMENTS = Param("segments", 2, "segments of a piecewise fit", kind=int, low=1)
PER_GROUP = Param("per_group", 0.0, "a finite number", low=0.0)
"""Final-aggregation seconds per partial-aggregate row."""
GROUPS = Param("groups", 0, "groups per batch", kind=int, low=0, high=MAX_TUPLES)


def tuples_within_by_bisection(model: QueryCost, duration_s: float) -> int:
    """Largest ``n`` with ``model.cost(n) <= duration_s`` for any non-decreasing model.

    Exponential search for an upper bound, then bisection on integers.
    """
    if not fits(model.cost(1), duration_s):
        return 0
    lo, hi = 1, 2
    while hi < MAX_TUPLES and fits(model.cost(hi), duration_s):
        lo, hi = hi, hi * 2
    if hi >= MAX_TUPLES and fits(model.cost(MAX_TUPLES), duration_s):
        return MAX_TUPLES
    while hi - lo > 1:  # invariant: cost(lo) fits, cost(hi) does not
        mid = (lo + hi) // 2
        if fits(model.cost(mid), duration_s):
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class LinearCost:
    """``cost(n) = per_tuple * n + overhead`` (paper eq. 1, per batch).

    Examples
    --------
    >>> m = LinearCost(per_tuple=0.5)  # 2 tuples per second, the paper's Sec. 3.1 example
    >>> m.cost(4), m.tuples_within(3.0)
    (2.0, 6)
    """

    per_tuple: float
    overhead: float = 0.0

    def __post_init__(self) -> None:
        check_number(PER_TUPLE, self.per_tuple, "linear cost per_tuple", text=False)
        check_number(OVERHEAD, self.overhead, "linear cost overhead", text=False)

    def cost(self, tuples: int) -> float:
        return self.per_tuple * tuples + self.overhead

    def tuples_within(self, duration_s: float) -> int:
        room = duration_s - self.overhead
        if not fits(self.overhead + self.per_tuple, duration_s):
            return 0
        n = math.floor(room / self.per_tuple)
        # float division may land one below or above the exact integer
        while fits(self.cost(n + 1), duration_s):
            n += 1
        while n > 0 and not fits(self.cost(n), duration_s):
            n -= 1
        return min(n, MAX_TUPLES)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "linear", "per_tuple": self.per_tuple, "overhead": self.overhead}


@dataclass(frozen=True)
class PiecewiseLinearCost:
    """A continuous, non-decreasing piecewise-linear cost through ``breakpoints``.

    ``breakpoints`` are ``(tuples, seconds)`` pairs with strictly increasing tuples, the
    first at 0 tuples (its seconds are the per-batch overhead); beyond the last breakpoint
    the last segment's slope continues. The paper fits this model to TPC-H (Sec. 6.2).
    """

    breakpoints: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        points = tuple((float(x), float(y)) for x, y in self.breakpoints)
        object.__setattr__(self, "breakpoints", points)
        if len(points) < 2:
            msg = (
                f"piecewise cost breakpoints = {shown(list(points))}: "
                "allowed at least two [tuples, seconds] pairs"
            )
            raise AdabatchError(msg)
        if points[0][0] != 0.0:
            msg = (
                f"piecewise cost first breakpoint tuples = {points[0][0]:g}: allowed 0 "
                "(its seconds are the per-batch overhead)"
            )
            raise AdabatchError(msg)
        for (x0, y0), (x1, y1) in pairwise(points):
            if not (math.isfinite(x1) and math.isfinite(y1)) or x1 <= x0:
                msg = f"piecewise cost breakpoint tuples {x1:g} after {x0:g}: allowed increasing"
                raise AdabatchError(msg)
            if y1 < y0:
                msg = (
                    f"piecewise cost seconds {y1:g} at {x1:g} tuples < {y0:g} at {x0:g}: "
                    "allowed non-decreasing (a cost model must be monotone)"
                )
                raise AdabatchError(msg)
        check_number(OVERHEAD, points[0][1], "piecewise cost overhead", text=False)
        if points[-1][1] <= points[-2][1]:
            msg = (
                "piecewise cost last segment is flat: allowed a rising last segment "
                "(otherwise unbounded batches would cost nothing extra)"
            )
            raise AdabatchError(msg)

    @property
    def overhead(self) -> float:
        return self.breakpoints[0][1]

    def cost(self, tuples: int) -> float:
        xs = self.breakpoints
        for (x0, y0), (x1, y1) in pairwise(xs):
            if tuples <= x1:
                return y0 + (y1 - y0) * (tuples - x0) / (x1 - x0)
        (x0, y0), (x1, y1) = xs[-2], xs[-1]
        return y1 + (y1 - y0) * (tuples - x1) / (x1 - x0)

    def tuples_within(self, duration_s: float) -> int:
        return tuples_within_by_bisection(self, duration_s)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "piecewise", "breakpoints": [list(p) for p in self.breakpoints]}

    @classmethod
    def fit(
        cls,
        sizes: Sequence[float],
        seconds: Sequence[float],
        segments: int = 2,
        *,
        relative: bool = False,
    ) -> PiecewiseLinearCost:
        """Least-squares continuous piecewise-linear fit with ``segments`` segments
        (``relative=True``: of the relative errors, so that a 0.06 s batch is fitted as
        closely, in percent, as a 6 s one; a planning margin is a factor too).

        The model is ``overhead + sum_j slope_j * clip(n - k_j, 0, k_{j+1} - k_j)`` with
        knots ``0 = k_0 < k_1 < ... < k_segments``; overhead and slopes are fitted by
        non-negative least squares (so the fit is monotone) for every choice of interior
        knots among the measured sizes (exhaustive when small, else quantiles), keeping
        the smallest squared error. Sec. 6.2 fits TPC-H costs this way.
        """
        x = np.asarray(sizes, dtype=float)
        y = np.asarray(seconds, dtype=float)
        if x.shape != y.shape or x.ndim != 1:
            msg = f"piecewise fit needs equally long sizes and seconds, got {x.shape}, {y.shape}"
            raise AdabatchError(msg)
        segments = check_number(SEGMENTS, segments, "piecewise fit segments", text=False)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))) or np.any(x < 0):
            msg = "piecewise fit needs finite sizes >= 0 and finite seconds"
            raise AdabatchError(msg)
        distinct = np.unique(x[x > 0])
        if len(distinct) < segments + 1:
            msg = (
                f"piecewise fit with {segments} segments needs at least {segments + 1} "
                f"distinct positive sizes, got {len(distinct)}"
            )
            raise AdabatchError(msg)
        top = float(distinct[-1])
        candidates = distinct[:-1]
        if math.comb(len(candidates), segments - 1) <= 20000:
            knot_sets = [list(c) for c in combinations(candidates.tolist(), segments - 1)]
        else:
            qs = np.linspace(0, 1, segments + 1)[1:-1]
            knot_sets = [sorted(set(np.quantile(candidates, qs).tolist()))]
        best: tuple[float, list[float], np.ndarray] | None = None
        for inner in knot_sets:
            knots = [0.0, *inner, top]
            basis = [np.ones_like(x)]
            for j in range(len(knots) - 1):
                width = knots[j + 1] - knots[j]
                if j == len(knots) - 2:
                    basis.append(np.clip(x - knots[j], 0.0, None))
                else:
                    basis.append(np.clip(x - knots[j], 0.0, width))
            a = np.column_stack(basis)
            if relative:
                weight = 1.0 / np.maximum(np.abs(y), 1e-9)
                coef, residual = nnls(a * weight[:, None], y * weight)
            else:
                coef, residual = nnls(a, y)
            if best is None or residual < best[0] - 1e-12:
                best = (residual, knots, coef)
        assert best is not None
        _, knots, coef = best
        overhead, slopes = float(coef[0]), coef[1:]
        points = [(0.0, overhead)]
        for j, slope in enumerate(slopes):
            points.append((knots[j + 1], points[-1][1] + float(slope) * (knots[j + 1] - knots[j])))
        if points[-1][1] <= points[-2][1]:
            # A flat fitted tail: the data say flat, but the model must keep rising, so
            # rise by 0.1% of the largest measurement over the segment. (The mean of y/x
            # used before counts the overhead as slope: CQ4's final aggregation, flat at
            # 0.26-0.38 s from 2 to 30 batches, came out at 2.1 s for 30.)
            rise = max(1e-3 * float(np.max(np.abs(y))), 1e-9)
            points[-1] = (points[-1][0], points[-2][1] + rise)
        return cls(tuple(points))


MAX_EXPR_CHARS = 500
"""Longest cost expression: a formula, not a program (deep nesting would exhaust the stack)."""

_EXPR_FUNCS: dict[str, Callable[..., float]] = {
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "min": min,
    "max": max,
}
_EXPR_OPS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _compile_expr(text: str) -> Callable[[float], float]:
    """A safe evaluator for arithmetic in ``n`` (numbers, + - * / **, log, sqrt, ...)."""
    if len(text) > MAX_EXPR_CHARS:
        msg = (
            f"cost expr {shown(text)} has {len(text)} characters: allowed at most {MAX_EXPR_CHARS}"
        )
        raise AdabatchError(msg)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        msg = f"cost expr {shown(text)} is not an arithmetic expression in n"
        raise AdabatchError(msg) from None

    def check(node: ast.AST) -> None:
        if isinstance(node, ast.Expression):
            check(node.body)
        elif isinstance(node, ast.BinOp) and type(node.op) in _EXPR_OPS:
            check(node.left)
            check(node.right)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _EXPR_OPS:
            check(node.operand)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, int | float)) or (
            isinstance(node, ast.Name) and node.id == "n"
        ):
            pass
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _EXPR_FUNCS
            and not node.keywords
        ):
            for arg in node.args:
                check(arg)
        else:
            allowed = "numbers, n, + - * / **, " + ", ".join(_EXPR_FUNCS)
            msg = f"cost expr {shown(text)} uses {ast.dump(node)[:40]}...: allowed {allowed}"
            raise AdabatchError(msg)

    try:
        check(tree)
    except RecursionError:
        msg = f"cost expr {shown(text)} is nested too deeply"
        raise AdabatchError(msg) from None

    def evaluate(node: ast.AST, n: float) -> float:
        if isinstance(node, ast.Expression):
            return evaluate(node.body, n)
        if isinstance(node, ast.BinOp):
            return _EXPR_OPS[type(node.op)](evaluate(node.left, n), evaluate(node.right, n))
        if isinstance(node, ast.UnaryOp):
            return _EXPR_OPS[type(node.op)](evaluate(node.operand, n))
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return float(n)
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        return float(_EXPR_FUNCS[node.func.id](*(evaluate(a, n) for a in node.args)))

    return lambda n: evaluate(tree, n)


@dataclass(frozen=True)
class MonotoneCost:
    """Any non-decreasing cost function of the batch size; inverse by bisection.

    Give ``fn`` (a Python callable) or ``expr`` (arithmetic in ``n``, storable in JSON).
    Monotonicity is checked on a geometric grid of sizes up to ``check_up_to``.

    Examples
    --------
    >>> m = MonotoneCost(expr="1 + 0.5 * n ** 0.5")
    >>> m.cost(16), m.tuples_within(3.0)
    (3.0, 16)
    """

    fn: Callable[[float], float] | None = field(default=None, compare=False)
    expr: str | None = None
    check_up_to: int = 10**9

    def __post_init__(self) -> None:
        if (self.fn is None) == (self.expr is None):
            msg = "monotone cost needs exactly one of fn (a callable) or expr (text in n)"
            raise AdabatchError(msg)
        if self.expr is not None:
            object.__setattr__(self, "fn", _compile_expr(self.expr))
        what = self.expr if self.expr is not None else getattr(self.fn, "__name__", "fn")
        grid = np.unique(np.geomspace(1, max(self.check_up_to, 2), 200).astype(np.int64))
        prev = -math.inf
        for n in [0, *grid.tolist()]:
            try:
                value = self.cost(n)
            except (ArithmeticError, ValueError):
                msg = f"monotone cost {shown(what)} cannot be evaluated at n = {n}"
                raise AdabatchError(msg) from None
            if not math.isfinite(value) or value < 0:
                msg = (
                    f"monotone cost {shown(what)} at n = {n} is {shown(value)}: allowed finite >= 0"
                )
                raise AdabatchError(msg)
            if value < prev - TIME_EPS:
                msg = f"monotone cost {shown(what)} decreases at n = {n}: allowed non-decreasing"
                raise AdabatchError(msg)
            prev = value

    def cost(self, tuples: int) -> float:
        assert self.fn is not None
        return float(self.fn(tuples))

    def tuples_within(self, duration_s: float) -> int:
        return tuples_within_by_bisection(self, duration_s)

    def to_json(self) -> dict[str, Any]:
        if self.expr is None:
            msg = "a monotone cost given as a Python callable cannot be stored: use expr"
            raise AdabatchError(msg)
        return {"kind": "expr", "expr": self.expr}


COST_KINDS = ("linear", "piecewise", "expr")


def cost_from_json(data: Mapping[str, Any], where: str = "cost") -> QueryCost:
    """The cost model of a JSON object (``kind`` = linear, piecewise or expr)."""
    if not isinstance(data, Mapping):
        msg = f"{where} = {shown(data)}: allowed an object with kind one of {', '.join(COST_KINDS)}"
        raise AdabatchError(msg)
    kind = data.get("kind")
    fields = {
        "linear": {"kind", "per_tuple", "overhead"},
        "piecewise": {"kind", "breakpoints"},
        "expr": {"kind", "expr"},
    }
    if kind not in fields:
        msg = f"{where} kind = {shown(kind)}: allowed one of {', '.join(COST_KINDS)}"
        raise AdabatchError(msg)
    unknown = sorted(set(data) - fields[kind])
    if unknown:
        msg = f"{where} ({kind}) has unknown keys {unknown}: allowed {sorted(fields[kind])}"
        raise AdabatchError(msg)
    try:
        if kind == "linear":
            if "per_tuple" not in data:
                msg = f"{where} (linear) needs per_tuple (seconds per tuple, > 0)"
                raise AdabatchError(msg)
            return LinearCost(
                check_number(PER_TUPLE, data["per_tuple"]),
                check_number(OVERHEAD, data.get("overhead", 0.0)),
            )
        if kind == "piecewise":
            points = data.get("breakpoints")
            ok = isinstance(points, list) and all(
                isinstance(p, list | tuple) and len(p) == 2 for p in points
            )
            if not ok:
                msg = f"{where} breakpoints = {shown(points)}: allowed a list of [tuples, seconds]"
                raise AdabatchError(msg)
            return PiecewiseLinearCost(
                tuple(
                    (check_number(BREAKPOINT_TUPLES, a), check_number(BREAKPOINT_SECONDS, b))
                    for a, b in points
                )
            )
        expr = data.get("expr")
        if not isinstance(expr, str):
            msg = f"{where} expr = {shown(expr)}: allowed a string in n, e.g. '0.5 + 0.01 * n'"
            raise AdabatchError(msg)
        return MonotoneCost(expr=expr)
    except AdabatchError as exc:
        if str(exc).startswith(where):
            raise
        msg = f"{where}: {exc}"
        raise AdabatchError(msg) from None


@dataclass(frozen=True)
class AggregationCost:
    """Final-aggregation cost versus the number of batches (paper Sec. 3.1 eq. 4, Sec. 6.2).

    ``cost(b) = 0`` for one batch (nothing to combine); otherwise
    ``model.cost(b) + per_group * groups * b`` where ``model`` is any cost model over the
    number of batches (linear or piecewise, fitted by ``adabatch deadline profile``) and the
    optional group term scales with the partial-aggregate rows (paper: "assuming batches
    each containing all the groups").
    """

    model: QueryCost | None = None
    per_group: float = 0.0
    groups: int = 0

    def __post_init__(self) -> None:
        check_number(PER_GROUP, self.per_group, "aggregation per_group", text=False)
        groups = check_number(GROUPS, self.groups, "aggregation groups", text=False)
        object.__setattr__(self, "groups", groups)

    def cost(self, batches: int) -> float:
        if batches <= 1:
            return 0.0
        base = 0.0 if self.model is None else self.model.cost(batches)
        return base + self.per_group * self.groups * batches

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.model is None else dict(self.model.to_json())
        if self.model is None:
            out["kind"] = "none"
        if self.per_group != 0.0 or self.groups != 0:
            out["per_group"] = self.per_group
            out["groups"] = self.groups
        return out

    @classmethod
    def fit(
        cls, batch_counts: Sequence[float], seconds: Sequence[float], segments: int = 1
    ) -> AggregationCost:
        """Piecewise-linear fit of measured final-aggregation seconds vs number of batches."""
        return cls(PiecewiseLinearCost.fit(batch_counts, seconds, segments))


NO_AGG = AggregationCost()


def agg_cost_from_json(data: Mapping[str, Any] | None, where: str = "agg_cost") -> AggregationCost:
    """The :class:`AggregationCost` of a JSON object: a cost model's keys (kind, ...) plus
    optional ``per_group`` and ``groups``; ``kind: none`` (or no object) is free."""
    if data is None:
        return NO_AGG
    if not isinstance(data, Mapping):
        msg = f"{where} = {shown(data)}: allowed an object with kind one of none, linear, piecewise"
        raise AdabatchError(msg)
    rest = {k: v for k, v in data.items() if k not in ("per_group", "groups")}
    if rest.get("kind") == "linear" and "per_batch" in rest:
        # over the number of batches, "per_batch" reads better than per_tuple
        if "per_tuple" in rest:
            msg = f"{where}: give per_batch or per_tuple, not both"
            raise AdabatchError(msg)
        rest["per_tuple"] = rest.pop("per_batch")
    per_group = check_number(PER_GROUP, data.get("per_group", 0.0), f"{where} per_group")
    groups = check_number(GROUPS, data.get("groups", 0), f"{where} groups")
    if rest.get("kind", "none") == "none":
        if set(rest) - {"kind"}:
            msg = f"{where} (none) has unknown keys {sorted(set(rest) - {'kind'})}"
            raise AdabatchError(msg)
        model = None
    else:
        model = cost_from_json(rest, where)
    try:
        return AggregationCost(model, per_group, groups)
    except AdabatchError as exc:
        msg = f"{where}: {exc}"
        raise AdabatchError(msg) from None
