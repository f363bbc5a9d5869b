"""The source's options: Spark's camelCase names, the earlier names with a warning, the
trigger options (maxTriggerDelay, startingBacklog) and the mode."""

from __future__ import annotations

import warnings

import pytest

from adabatch.errors import AdabatchError
from adabatch.streaming.options import RENAMED_OPTIONS, parse_options


def parse(**opts):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a current name never warns
        return parse_options({"controller": "static", "param.interval": "1", **opts})


def test_camel_case_names_in_any_case():
    o = parse(
        metricsPath="/tmp/m.jsonl",
        STATEPATH="/tmp/s.json",
        minrowspertrigger="500",
        maxTriggerDelay="5 seconds",
        startingBacklog="1 minute",
    )
    assert (o.metrics_path, o.state_path) == ("/tmp/m.jsonl", "/tmp/s.json")
    assert (o.min_rows_per_batch, o.max_trigger_delay_s, o.starting_backlog_s) == (500, 5, 60)
    assert parse(maxRowsPerTrigger="70").max_rows_per_batch == 70


def test_round_trip_through_spark_options_uses_camel_case():
    o = parse(
        metricsPath="m.jsonl",
        minRowsPerTrigger="5",
        maxTriggerDelay="2.5s",
        startingBacklog="30s",
        mode="advise",
        wordsPerLine="3",
    )
    out = o.to_options()
    assert {"metricsPath", "minRowsPerTrigger", "maxTriggerDelay", "startingBacklog"} <= set(out)
    assert not set(RENAMED_OPTIONS) & set(out)
    assert parse(**out) == o


@pytest.mark.parametrize(("old", "new", "value"), [(o, n, "7") for o, n in RENAMED_OPTIONS.items()])
def test_earlier_names_still_work_and_warn(old, new, value):
    with pytest.warns(DeprecationWarning, match=f"'{old}' is deprecated: use '{new}'"):
        o = parse_options({"controller": "static", old: value})
    assert o == parse_options({"controller": "static", new: value})


def test_old_and_new_name_must_agree():
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(AdabatchError, match="'metrics_path' and 'metricsPath' name the same"),
    ):
        parse_options({"metrics_path": "a.jsonl", "metricsPath": "b.jsonl"})


def test_max_trigger_delay_defaults_to_fifteen_minutes_with_min_rows_only():
    assert parse(minRowsPerTrigger="5").max_trigger_delay_s == 900.0
    assert parse().max_trigger_delay_s is None
    with pytest.raises(AdabatchError, match="'maxTriggerDelay' bounds minRowsPerTrigger"):
        parse(maxTriggerDelay="5s")


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("maxTriggerDelay", "soon", "is not a duration"),
        ("maxTriggerDelay", "-1s", ">= 0"),
        ("startingBacklog", "2 days", "longer than a day"),
        ("startingBacklog", "48h", "longer than a day"),
    ],
)
def test_bad_durations_name_the_option(name, value, why):
    with pytest.raises(AdabatchError, match=f"option '{name}' = .*{why}"):
        parse(minRowsPerTrigger="5", **{name: value})


def test_mode():
    assert parse().mode == "control"
    assert parse(mode="ADVISE").advise
    with pytest.raises(AdabatchError, match="option 'mode' = 'steer' is not allowed"):
        parse(mode="steer")
    with pytest.raises(AdabatchError, match="'advise' needs a controller"):
        parse_options({"controller": "spark-default", "mode": "advise"})


def test_fingerprint_names_the_mode_only_when_advising():
    # state files written before modes existed carry no mode and must still match
    assert "mode" not in parse().fingerprint()
    assert parse(mode="advise").fingerprint()["mode"] == "advise"
    # the trigger options may change between runs of one query, as Kafka's may
    base = parse().fingerprint()
    assert parse(startingBacklog="5s").fingerprint() == base
    assert parse(minRowsPerTrigger="5", maxTriggerDelay="1s").fingerprint() == base


def test_source_options_in_camel_case_too():
    assert dict(parse(wordsPerLine="3").source_options) == {"words_per_line": "3"}
    assert dict(parse(zipfS="1.5").source_options) == {"zipf_s": "1.5"}
    with pytest.raises(AdabatchError, match="given twice"):
        parse(wordsPerLine="3", words_per_line="4")
    with pytest.raises(AdabatchError, match=r"has no option 'rowspersecond'.*maxRowsPerTrigger"):
        parse(rowsPerSecond="5")
