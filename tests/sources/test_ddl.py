"""Spark DDL schemas for text sources: parsing, Arrow types, and casting text to values
(the vectorised path must give exactly what the value-by-value rules give)."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adabatch.errors import AdabatchError
from adabatch.sources.ddl import (
    ARROW_TYPES,
    SUPPORTED,
    CastError,
    Column,
    _fast_array,
    _python_array,
    arrow_schema,
    cast_array,
    cast_value,
    column_array,
    format_ddl,
    parse_ddl,
)


def test_columns_types_and_aliases_parse_to_canonical_names() -> None:
    cols = parse_ddl(
        "a integer, b long,c SHORT , d byte, e real, f Double, g boolean, h date, "
        "i timestamp, j string, k binary, l INT NOT NULL"
    )
    assert [c.name for c in cols] == list("abcdefghijkl")
    assert [c.type for c in cols] == [
        "INT", "BIGINT", "SMALLINT", "TINYINT", "FLOAT", "DOUBLE", "BOOLEAN", "DATE",
        "TIMESTAMP", "STRING", "BINARY", "INT",
    ]  # fmt: skip


def test_backticked_names_round_trip_through_format() -> None:
    cols = parse_ddl("`my value` DOUBLE, `a``b` STRING, `x,y` INT, plain BIGINT")
    assert [c.name for c in cols] == ["my value", "a`b", "x,y", "plain"]
    text = format_ddl(cols)
    assert text == "`my value` DOUBLE, `a``b` STRING, `x,y` INT, plain BIGINT"
    assert parse_ddl(text) == cols


def test_arrow_schema_uses_the_types_spark_converts_from() -> None:
    schema = arrow_schema(parse_ddl("k INT, v DOUBLE, t TIMESTAMP, s STRING"))
    assert schema.types == [pa.int32(), pa.float64(), pa.timestamp("us", tz="UTC"), pa.string()]
    assert schema.names == ["k", "v", "t", "s"]
    assert set(ARROW_TYPES) == set(SUPPORTED.split(", "))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("key", "write each column as NAME TYPE"),
        ("key INT value DOUBLE", "has type 'INT value DOUBLE'"),
        ("key INT,", "write each column as NAME TYPE"),
        ("my key INT", "has type 'key INT'"),
        ("1key INT", "plain identifier goes in backticks"),
        ("`key INT", "unclosed backtick"),
        ("a INT, A DOUBLE", "names column 'A' twice"),
    ],
)
def test_bad_ddl_is_one_line_naming_the_problem(text: str, expected: str) -> None:
    with pytest.raises(AdabatchError, match=r"^schema") as err:
        parse_ddl(text)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kind", ["DECIMAL(10,2)", "ARRAY<INT>", "MAP<STRING, INT>", "VARCHAR(5)"])
def test_unsupported_types_list_the_supported_ones(kind: str) -> None:
    with pytest.raises(AdabatchError) as err:
        parse_ddl(f"k INT, v {kind}", what="redis source option 'schema'")
    message = str(err.value)
    assert message.startswith("redis source option 'schema' column 'v' has type")
    assert f"supported types are {SUPPORTED}" in message
    assert "BIGINT" in message and "TIMESTAMP" in message


def test_size_limits() -> None:
    with pytest.raises(AdabatchError, match="at most 1000"):
        parse_ddl(", ".join(f"c{i} INT" for i in range(1001)))
    with pytest.raises(AdabatchError, match="characters: at most"):
        parse_ddl("`" + "x" * 100_001 + "` INT")


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (b"42", "INT", 42),
        ("-7", "TINYINT", -7),
        (" 12 ", "BIGINT", 12),
        ("+3", "SMALLINT", 3),
        (5, "BIGINT", 5),
        (b"1.5", "DOUBLE", 1.5),
        ("-2e3", "FLOAT", -2000.0),
        (3, "DOUBLE", 3.0),
        (b"YES", "BOOLEAN", True),
        ("f", "BOOLEAN", False),
        (True, "BOOLEAN", True),
        ("2024-05-01", "DATE", dt.date(2024, 5, 1)),
        ("2024-05-01T00:00:01Z", "TIMESTAMP", 1_714_521_601_000_000),
        ("2024-05-01 02:00:01+02:00", "TIMESTAMP", 1_714_521_601_000_000),
        ("2024-05-01T00:00:01", "TIMESTAMP", 1_714_521_601_000_000),  # naive is UTC
        (b"1714521601.5", "TIMESTAMP", 1_714_521_601_500_000),
        (dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC), "TIMESTAMP", 1_000_000),
        (b"caf\xc3\xa9", "STRING", "café"),
        (7, "STRING", "7"),
        ("", "STRING", ""),
        (b"\xff\x00", "BINARY", b"\xff\x00"),
        ("", "INT", None),
        (b"", "TIMESTAMP", None),
        (None, "DOUBLE", None),
    ],
)
def test_cast_value(value: object, kind: str, expected: object) -> None:
    assert cast_value(value, kind) == expected


@pytest.mark.parametrize(
    ("value", "kind", "reason"),
    [
        ("1.0", "INT", "not an integer"),
        ("0x10", "BIGINT", "not an integer"),
        ("128", "TINYINT", "out of its range (8-bit signed)"),
        ("2147483648", "INT", "out of its range (32-bit signed)"),
        (True, "INT", "not an integer"),
        ("abc", "DOUBLE", "not a number"),
        ("1e39", "FLOAT", "out of its range (32-bit float)"),
        ("maybe", "BOOLEAN", "not a boolean"),
        ("2024-13-01", "DATE", "not an ISO 8601 date"),
        ("yesterday", "TIMESTAMP", "not an ISO 8601 timestamp"),
        ("nan", "TIMESTAMP", "years 1-9999"),
        ("1e300", "TIMESTAMP", "years 1-9999"),
        (b"\xff", "STRING", "not UTF-8 text"),
        (3, "BINARY", "not bytes or text"),
    ],
)
def test_bad_values_say_why(value: object, kind: str, reason: str) -> None:
    with pytest.raises(CastError) as err:
        cast_value(value, kind)
    assert reason in str(err.value)
    assert f"does not cast to {kind}" in str(err.value)
    assert err.value.type_name == kind


def test_column_array_finds_the_first_bad_row() -> None:
    with pytest.raises(CastError) as err:
        column_array([b"1", b"2", None, b"x3", b"y"], "INT")
    assert err.value.index == 3
    assert err.value.value == b"x3"


def test_column_array_types_and_nulls() -> None:
    arr = column_array([b"1", None, b"", b" 4"], "INT")
    assert arr.type == pa.int32()
    assert arr.to_pylist() == [1, None, None, 4]
    stamps = column_array(["1970-01-01T00:00:02Z", None], "TIMESTAMP")
    assert stamps.type == pa.timestamp("us", tz="UTC")
    assert stamps.cast(pa.int64()).to_pylist() == [2_000_000, None]
    assert column_array([1, 2.5, None], "DOUBLE").to_pylist() == [1.0, 2.5, None]
    assert column_array([], "BOOLEAN").type == pa.bool_()


# The vectorised path (Arrow's casts where they agree with the rules) must give exactly
# what the value-by-value rules give, and refuse exactly what they refuse.
_TEXT = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(width=32).map(lambda f: f"{f:.9g}"),
    st.sampled_from(
        [
            "",
            " 1",
            "+2",
            "-0",
            "0x1F",
            "1_000",
            "1.",
            ".5",
            "1e5",
            "Infinity",
            "-nan",
            "NaN",
            "true",
            "No",
            " y ",
            "T",
            "1.0e",
            "e3",
            "--1",
            "١٢",
        ]
    ),
    st.text(max_size=6),
)


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.one_of(st.none(), _TEXT), max_size=12), kind=st.sampled_from(
    ["TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "BOOLEAN", "STRING"]
))  # fmt: skip
def test_vectorised_casts_agree_with_the_rules(values: list[str | None], kind: str) -> None:
    raw = [None if v is None else v.encode() for v in values]
    try:
        expected = _python_array(raw, kind)
    except CastError as err:
        with pytest.raises(CastError) as got:
            cast_array(pa.array(raw, pa.binary()), kind)
        assert got.value.index == err.index
        return
    actual = cast_array(pa.array(raw, pa.binary()), kind)
    assert actual.type == expected.type
    for a, b in zip(actual.to_pylist(), expected.to_pylist(), strict=True):
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def test_column_keeps_its_name_and_type() -> None:
    assert Column("v", "DOUBLE").ddl() == "v DOUBLE"
    assert Column("a b", "INT").ddl() == "`a b` INT"


@pytest.mark.parametrize(
    ("kind", "texts"),
    [
        ("INT", [b"1", b"-20", None, b""]),
        ("BIGINT", [b"9223372036854775807", None]),
        ("DOUBLE", [b"1.5", b"-2e3", b".5", None, b""]),
        ("FLOAT", [b"0.1", b"Infinity", None]),
        ("BOOLEAN", [b"true", b" No ", None, b""]),
        ("STRING", [b"caf\xc3\xa9", None, b""]),
    ],
)
def test_ordinary_text_takes_the_vectorised_path(kind: str, texts: list[bytes | None]) -> None:
    fast = _fast_array(pa.array(texts, pa.binary()), kind)
    assert fast is not None
    assert fast.equals(_python_array(texts, kind))
