"""The deadline paper's queries as partial and final aggregations (Sec. 6.1, 7.1, Table 3).

Every query is split the way the Custom Query Scheduler runs it: a **partial** aggregation
over one batch (a Spark SQL job over the batch's landing files, written as Parquet), and a
**final** aggregation that combines the partials of all batches into the answer. Averages
are kept as sums and counts in the partials and divided only in the final step (Sec. 6.1).
Each query also has its **reference** SQL over the full tables, which DuckDB answers as the
oracle.

Queries: the paper's custom queries CQ1-CQ4 (Table 3) and TPC-H Q1, Q3, Q4, Q6, Q10, Q12,
Q14 and Q19. Q3, Q4, Q10 and Q12 join ``orders`` with ``lineitem`` inside one batch (exact
because a landing slot holds an order with all its lineitems; the join also matches the
slots' ``ts`` so that Structured Streaming can bound its join state with a watermark, as
the paper does, Sec. 7.2); Q14 and Q19 join ``lineitem`` with the static ``part``; Q3 and
Q10 also join the static ``customer`` (and ``nation``). Deviations from the TPC-H text:
Q1's date is the literal ``1998-09-02`` (= ``1998-12-01 - 90 days``), Q3 and Q10 break
ties in their ORDER BY with the order or customer key so that LIMIT is deterministic,
Q14's percentage is computed in DOUBLE from exact decimal sums. CQ2-CQ4 have no ORDER BY,
as in the paper (their answers are compared as sets of rows): sorting CQ4's 200,000 groups
was a third of its final aggregation, and that step bounds the tightest deadline.

Spark SQL placeholders ``{orders}``, ``{lineitem}``, ``{part}``, ... are filled with
DataFrames (``spark.sql(text, **frames)``), so the same partial SQL runs over a batch of
files and over streaming DataFrames (:mod:`adabatch.deadline.spark.baseline`). This module
holds the definitions; :mod:`adabatch.deadline.spark.jobs` runs them on Spark and DuckDB.
"""

from __future__ import annotations

from dataclasses import dataclass

from adabatch.deadline.core.spec import QUERY_NAMES
from adabatch.errors import AdabatchError


@dataclass(frozen=True)
class QueryDef:
    """One query: what it reads, its partial, final and reference SQL.

    ``primary`` is the stream whose tuples the scheduler counts (the query's input rate and
    batch sizes are in these tuples). ``keys`` are the partial aggregate's grouping columns
    (empty for a global aggregate).
    """

    name: str
    title: str
    streams: tuple[str, ...]
    statics: tuple[str, ...]
    primary: str
    keys: tuple[str, ...]
    partial_sql: str
    final_sql: str
    reference_sql: str

    @property
    def tables(self) -> tuple[str, ...]:
        return (*self.streams, *self.statics)

    @property
    def ordered(self) -> bool:
        """Whether the answer's row order is part of the query (its final SQL sorts)."""
        return "ORDER BY" in " ".join(self.final_sql.upper().split())


_REVENUE = "l.l_extendedprice * (1 - l.l_discount)"

_Q19_WHERE = """
       (p.p_brand = 'Brand#12'
        AND p.p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
        AND l.l_quantity >= 1 AND l.l_quantity <= 11
        AND p.p_size BETWEEN 1 AND 5
        AND l.l_shipmode IN ('AIR', 'AIR REG')
        AND l.l_shipinstruct = 'DELIVER IN PERSON')
    OR (p.p_brand = 'Brand#23'
        AND p.p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
        AND l.l_quantity >= 10 AND l.l_quantity <= 20
        AND p.p_size BETWEEN 1 AND 10
        AND l.l_shipmode IN ('AIR', 'AIR REG')
        AND l.l_shipinstruct = 'DELIVER IN PERSON')
    OR (p.p_brand = 'Brand#34'
        AND p.p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
        AND l.l_quantity >= 20 AND l.l_quantity <= 30
        AND p.p_size BETWEEN 1 AND 15
        AND l.l_shipmode IN ('AIR', 'AIR REG')
        AND l.l_shipinstruct = 'DELIVER IN PERSON')"""

_Q10_KEYS = ("c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment")

QUERIES: dict[str, QueryDef] = {
    q.name: q
    for q in (
        QueryDef(
            name="cq1",
            title="CQ1: count of orders",
            streams=("orders",),
            statics=(),
            primary="orders",
            keys=(),
            partial_sql="SELECT count(*) AS total_orders FROM {orders}",
            final_sql="SELECT sum(total_orders) AS total_orders FROM {partials}",
            reference_sql="SELECT count(*) AS total_orders FROM orders",
        ),
        QueryDef(
            name="cq2",
            title="CQ2: orders per priority",
            streams=("orders",),
            statics=(),
            primary="orders",
            keys=("o_orderpriority",),
            partial_sql=(
                "SELECT count(*) AS total_orders, o_orderpriority FROM {orders} "
                "GROUP BY o_orderpriority"
            ),
            final_sql=(
                "SELECT sum(total_orders) AS total_orders, o_orderpriority FROM {partials} "
                "GROUP BY o_orderpriority"
            ),
            reference_sql=(
                "SELECT count(*) AS total_orders, o_orderpriority FROM orders "
                "GROUP BY o_orderpriority"
            ),
        ),
        QueryDef(
            name="cq3",
            title="CQ3: lineitems per supplier",
            streams=("lineitem",),
            statics=(),
            primary="lineitem",
            keys=("l_suppkey",),
            partial_sql=(
                "SELECT count(*) AS total_items, l_suppkey FROM {lineitem} GROUP BY l_suppkey"
            ),
            final_sql=(
                "SELECT sum(total_items) AS total_items, l_suppkey FROM {partials} "
                "GROUP BY l_suppkey"
            ),
            reference_sql=(
                "SELECT count(*) AS total_items, l_suppkey FROM lineitem GROUP BY l_suppkey"
            ),
        ),
        QueryDef(
            name="cq4",
            title="CQ4: lineitems per part",
            streams=("lineitem",),
            statics=(),
            primary="lineitem",
            keys=("l_partkey",),
            partial_sql=(
                "SELECT count(*) AS total_items, l_partkey FROM {lineitem} GROUP BY l_partkey"
            ),
            final_sql=(
                "SELECT sum(total_items) AS total_items, l_partkey FROM {partials} "
                "GROUP BY l_partkey"
            ),
            reference_sql=(
                "SELECT count(*) AS total_items, l_partkey FROM lineitem GROUP BY l_partkey"
            ),
        ),
        QueryDef(
            name="q1",
            title="TPC-H Q1: pricing summary report",
            streams=("lineitem",),
            statics=(),
            primary="lineitem",
            keys=("l_returnflag", "l_linestatus"),
            partial_sql="""
SELECT l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty,
       sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       sum(l_discount) AS sum_disc,
       count(*) AS count_order
FROM {lineitem}
WHERE l_shipdate <= DATE '1998-09-02'
GROUP BY l_returnflag, l_linestatus""",
            final_sql="""
SELECT l_returnflag, l_linestatus,
       sum(sum_qty) AS sum_qty,
       sum(sum_base_price) AS sum_base_price,
       sum(sum_disc_price) AS sum_disc_price,
       sum(sum_charge) AS sum_charge,
       CAST(sum(sum_qty) AS DOUBLE) / sum(count_order) AS avg_qty,
       CAST(sum(sum_base_price) AS DOUBLE) / sum(count_order) AS avg_price,
       CAST(sum(sum_disc) AS DOUBLE) / sum(count_order) AS avg_disc,
       sum(count_order) AS count_order
FROM {partials}
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus""",
            reference_sql="""
SELECT l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty,
       sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty,
       avg(l_extendedprice) AS avg_price,
       avg(l_discount) AS avg_disc,
       count(*) AS count_order
FROM lineitem
WHERE l_shipdate <= DATE '1998-09-02'
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus""",
        ),
        QueryDef(
            name="q3",
            title="TPC-H Q3: shipping priority",
            streams=("orders", "lineitem"),
            statics=("customer",),
            primary="lineitem",
            keys=("l_orderkey", "o_orderdate", "o_shippriority"),
            partial_sql=f"""
SELECT l.l_orderkey, sum({_REVENUE}) AS revenue, o.o_orderdate, o.o_shippriority
FROM {{customer}} c
JOIN {{orders}} o ON c.c_custkey = o.o_custkey
JOIN {{lineitem}} l ON l.l_orderkey = o.o_orderkey AND l.ts = o.ts
WHERE c.c_mktsegment = 'BUILDING'
  AND o.o_orderdate < DATE '1995-03-15'
  AND l.l_shipdate > DATE '1995-03-15'
GROUP BY l.l_orderkey, o.o_orderdate, o.o_shippriority""",
            final_sql="""
SELECT l_orderkey, sum(revenue) AS revenue, o_orderdate, o_shippriority
FROM {partials}
GROUP BY l_orderkey, o_orderdate, o_shippriority
ORDER BY revenue DESC, o_orderdate, l_orderkey
LIMIT 10""",
            reference_sql=f"""
SELECT l.l_orderkey, sum({_REVENUE}) AS revenue, o.o_orderdate, o.o_shippriority
FROM customer c, orders o, lineitem l
WHERE c.c_mktsegment = 'BUILDING'
  AND c.c_custkey = o.o_custkey
  AND l.l_orderkey = o.o_orderkey
  AND o.o_orderdate < DATE '1995-03-15'
  AND l.l_shipdate > DATE '1995-03-15'
GROUP BY l.l_orderkey, o.o_orderdate, o.o_shippriority
ORDER BY revenue DESC, o.o_orderdate, l.l_orderkey
LIMIT 10""",
        ),
        QueryDef(
            name="q4",
            title="TPC-H Q4: order priority checking",
            streams=("orders", "lineitem"),
            statics=(),
            primary="lineitem",
            keys=("o_orderpriority",),
            partial_sql="""
SELECT o.o_orderpriority, count(*) AS order_count
FROM {orders} o
LEFT SEMI JOIN {lineitem} l
  ON l.l_orderkey = o.o_orderkey AND l.ts = o.ts AND l.l_commitdate < l.l_receiptdate
WHERE o.o_orderdate >= DATE '1993-07-01' AND o.o_orderdate < DATE '1993-10-01'
GROUP BY o.o_orderpriority""",
            final_sql="""
SELECT o_orderpriority, sum(order_count) AS order_count
FROM {partials}
GROUP BY o_orderpriority
ORDER BY o_orderpriority""",
            reference_sql="""
SELECT o_orderpriority, count(*) AS order_count
FROM orders o
WHERE o.o_orderdate >= DATE '1993-07-01' AND o.o_orderdate < DATE '1993-10-01'
  AND EXISTS (SELECT * FROM lineitem l
              WHERE l.l_orderkey = o.o_orderkey AND l.l_commitdate < l.l_receiptdate)
GROUP BY o_orderpriority
ORDER BY o_orderpriority""",
        ),
        QueryDef(
            name="q6",
            title="TPC-H Q6: forecasting revenue change",
            streams=("lineitem",),
            statics=(),
            primary="lineitem",
            keys=(),
            partial_sql="""
SELECT sum(l_extendedprice * l_discount) AS revenue
FROM {lineitem}
WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
            final_sql="SELECT sum(revenue) AS revenue FROM {partials}",
            reference_sql="""
SELECT sum(l_extendedprice * l_discount) AS revenue
FROM lineitem
WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
        ),
        QueryDef(
            name="q10",
            title="TPC-H Q10: returned item reporting",
            streams=("orders", "lineitem"),
            statics=("customer", "nation"),
            primary="lineitem",
            keys=_Q10_KEYS,
            partial_sql=f"""
SELECT c.c_custkey, c.c_name, sum({_REVENUE}) AS revenue, c.c_acctbal, n.n_name,
       c.c_address, c.c_phone, c.c_comment
FROM {{customer}} c
JOIN {{orders}} o ON c.c_custkey = o.o_custkey
JOIN {{lineitem}} l ON l.l_orderkey = o.o_orderkey AND l.ts = o.ts
JOIN {{nation}} n ON c.c_nationkey = n.n_nationkey
WHERE o.o_orderdate >= DATE '1993-10-01' AND o.o_orderdate < DATE '1994-01-01'
  AND l.l_returnflag = 'R'
GROUP BY c.c_custkey, c.c_name, c.c_acctbal, c.c_phone, n.n_name, c.c_address, c.c_comment""",
            final_sql="""
SELECT c_custkey, c_name, sum(revenue) AS revenue, c_acctbal, n_name,
       c_address, c_phone, c_comment
FROM {partials}
GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
ORDER BY revenue DESC, c_custkey
LIMIT 20""",
            reference_sql=f"""
SELECT c.c_custkey, c.c_name, sum({_REVENUE}) AS revenue, c.c_acctbal, n.n_name,
       c.c_address, c.c_phone, c.c_comment
FROM customer c, orders o, lineitem l, nation n
WHERE c.c_custkey = o.o_custkey
  AND l.l_orderkey = o.o_orderkey
  AND o.o_orderdate >= DATE '1993-10-01' AND o.o_orderdate < DATE '1994-01-01'
  AND l.l_returnflag = 'R'
  AND c.c_nationkey = n.n_nationkey
GROUP BY c.c_custkey, c.c_name, c.c_acctbal, c.c_phone, n.n_name, c.c_address, c.c_comment
ORDER BY revenue DESC, c.c_custkey
LIMIT 20""",
        ),
        QueryDef(
            name="q12",
            title="TPC-H Q12: shipping modes and order priority",
            streams=("orders", "lineitem"),
            statics=(),
            primary="lineitem",
            keys=("l_shipmode",),
            partial_sql="""
SELECT l.l_shipmode,
       sum(CASE WHEN o.o_orderpriority = '1-URGENT' OR o.o_orderpriority = '2-HIGH'
                THEN 1 ELSE 0 END) AS high_line_count,
       sum(CASE WHEN o.o_orderpriority <> '1-URGENT' AND o.o_orderpriority <> '2-HIGH'
                THEN 1 ELSE 0 END) AS low_line_count
FROM {orders} o
JOIN {lineitem} l ON o.o_orderkey = l.l_orderkey AND l.ts = o.ts
WHERE l.l_shipmode IN ('MAIL', 'SHIP')
  AND l.l_commitdate < l.l_receiptdate
  AND l.l_shipdate < l.l_commitdate
  AND l.l_receiptdate >= DATE '1994-01-01' AND l.l_receiptdate < DATE '1995-01-01'
GROUP BY l.l_shipmode""",
            final_sql="""
SELECT l_shipmode, sum(high_line_count) AS high_line_count,
       sum(low_line_count) AS low_line_count
FROM {partials}
GROUP BY l_shipmode
ORDER BY l_shipmode""",
            reference_sql="""
SELECT l.l_shipmode,
       sum(CASE WHEN o.o_orderpriority = '1-URGENT' OR o.o_orderpriority = '2-HIGH'
                THEN 1 ELSE 0 END) AS high_line_count,
       sum(CASE WHEN o.o_orderpriority <> '1-URGENT' AND o.o_orderpriority <> '2-HIGH'
                THEN 1 ELSE 0 END) AS low_line_count
FROM orders o, lineitem l
WHERE o.o_orderkey = l.l_orderkey
  AND l.l_shipmode IN ('MAIL', 'SHIP')
  AND l.l_commitdate < l.l_receiptdate
  AND l.l_shipdate < l.l_commitdate
  AND l.l_receiptdate >= DATE '1994-01-01' AND l.l_receiptdate < DATE '1995-01-01'
GROUP BY l.l_shipmode
ORDER BY l.l_shipmode""",
        ),
        QueryDef(
            name="q14",
            title="TPC-H Q14: promotion effect",
            streams=("lineitem",),
            statics=("part",),
            primary="lineitem",
            keys=(),
            partial_sql=f"""
SELECT sum(CASE WHEN p.p_type LIKE 'PROMO%' THEN {_REVENUE} ELSE 0 END) AS promo_revenue,
       sum({_REVENUE}) AS revenue
FROM {{lineitem}} l
JOIN {{part}} p ON l.l_partkey = p.p_partkey
WHERE l.l_shipdate >= DATE '1995-09-01' AND l.l_shipdate < DATE '1995-10-01'""",
            final_sql="""
SELECT 100.00 * CAST(sum(promo_revenue) AS DOUBLE) / CAST(sum(revenue) AS DOUBLE)
       AS promo_revenue
FROM {partials}""",
            reference_sql=f"""
SELECT 100.00 * CAST(sum(CASE WHEN p.p_type LIKE 'PROMO%' THEN {_REVENUE} ELSE 0 END)
                     AS DOUBLE)
       / CAST(sum({_REVENUE}) AS DOUBLE) AS promo_revenue
FROM lineitem l, part p
WHERE l.l_partkey = p.p_partkey
  AND l.l_shipdate >= DATE '1995-09-01' AND l.l_shipdate < DATE '1995-10-01'""",
        ),
        QueryDef(
            name="q19",
            title="TPC-H Q19: discounted revenue",
            streams=("lineitem",),
            statics=("part",),
            primary="lineitem",
            keys=(),
            partial_sql=f"""
SELECT sum({_REVENUE}) AS revenue
FROM {{lineitem}} l
JOIN {{part}} p ON p.p_partkey = l.l_partkey
WHERE {_Q19_WHERE}""",
            final_sql="SELECT sum(revenue) AS revenue FROM {partials}",
            reference_sql=f"""
SELECT sum({_REVENUE}) AS revenue
FROM lineitem l, part p
WHERE p.p_partkey = l.l_partkey AND ({_Q19_WHERE})""",
        ),
    )
}

if tuple(QUERIES) != QUERY_NAMES:  # the spec parser validates names against QUERY_NAMES
    msg = f"queries {tuple(QUERIES)} differ from deadline.core.spec.QUERY_NAMES {QUERY_NAMES}"
    raise ImportError(msg)


def get_query(name: str) -> QueryDef:
    """The :class:`QueryDef` called ``name`` (case-insensitive)."""
    key = str(name).strip().lower()
    if key not in QUERIES:
        msg = f"query {name!r} is not implemented: allowed one of {', '.join(QUERY_NAMES)}"
        raise AdabatchError(msg)
    return QUERIES[key]
