"""Durations: our short forms and Spark's ("5 seconds", "1 minute", "100 ms"), accepted by
:func:`parse_duration` and so by every option that takes a duration."""

from __future__ import annotations

import json

import pytest

from adabatch.cli import main
from adabatch.errors import AdabatchError
from adabatch.params import Param
from adabatch.profiles import parse_duration, parse_profile
from adabatch.runs.spark_job import parse_trigger


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("500ms", 0.5),
        ("1.5m", 90.0),
        ("2h", 7200.0),
        ("5 seconds", 5.0),
        ("1 second", 1.0),
        ("1 minute", 60.0),
        ("3 minutes", 180.0),
        ("500 milliseconds", 0.5),
        ("2 hours", 7200.0),
        ("10 sec", 10.0),
        ("1 min", 60.0),
        ("100 ms", 0.1),
        ("250 microseconds", 0.00025),
        ("1 day", 86400.0),
        ("5 Seconds", 5.0),
        ("  2 MIN ", 120.0),
        ("interval 1 minute 30 seconds", 90.0),
        ("1 hour 30 minutes", 5400.0),
        ("1m30s", 90.0),
        (".5 s", 0.5),
        (12, 12.0),
        (0.25, 0.25),
    ],
)
def test_durations_in_our_forms_and_sparks(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "s", "seconds", "5 parsecs", "1 30s", "5 s s", "5,s", "nan", "interval", "1m30"]
)
def test_a_bad_duration_is_one_line_that_lists_the_forms(text):
    with pytest.raises(AdabatchError) as err:
        parse_duration(text)
    message = str(err.value)
    assert "\n" not in message
    for form in ("90s", "500ms", "'5 seconds'", "'1 minute'", "'100 ms'", "'10 sec'"):
        assert form in message


@pytest.mark.parametrize("text", ["-1s", "-2 minutes", "1e999 seconds"])
def test_a_negative_or_infinite_duration_is_refused(text):
    with pytest.raises(AdabatchError, match="finite number of seconds >= 0"):
        parse_duration(text)


def test_a_very_long_text_is_not_parsed():
    with pytest.raises(AdabatchError, match="is not a duration"):
        parse_duration("1s " * 1000)


def test_profiles_and_the_trigger_take_sparks_forms():
    step = parse_profile("step:100:300:1 minute")
    assert step.rate(59.9) == 100 and step.rate(60.1) == 300
    assert parse_profile("sine:1:3:2 min").rate(30.0) == pytest.approx(3.0)
    steps = parse_profile("steps:10@0,20@30 seconds,40@1 minute")
    assert [steps.rate(t) for t in (29.0, 31.0, 61.0)] == [10, 20, 40]
    assert parse_trigger("processingTime:5 seconds") == 5.0
    assert parse_trigger("processingTime:500 milliseconds") == 0.5
    with pytest.raises(AdabatchError, match="'5 seconds'"):
        parse_profile("step:1:2:soon")


def test_the_cli_takes_sparks_forms_for_duration_and_warmup(tmp_path):
    out = tmp_path / "run"
    argv = ["simulate", "--workload", "reduce", "--controller", "fixed-point"]
    argv += ["--profile", "constant:2000", "--duration", "1 minute", "--warmup", "10 sec"]
    assert main([*argv, "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["duration_s"] == pytest.approx(60.0)
    assert summary["skip_s"] == pytest.approx(10.0)


def test_the_cli_names_a_bad_duration(tmp_path, capsys):
    argv = ["simulate", "--workload", "reduce", "--controller", "fixed-point"]
    argv += ["--profile", "constant:2000", "--duration", "a fortnight"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "'a fortnight' is not a duration" in err and "'1 minute'" in err
    assert not (tmp_path / "run").exists()


def test_the_grammar_lives_in_params_and_profiles_still_exports_it():
    import adabatch.params as params
    import adabatch.profiles as profiles

    assert profiles.parse_duration is params.parse_duration
    assert profiles.DURATION_FORMS is params.DURATION_FORMS


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("2", 2.0), ("2s", 2.0), ("1500ms", 1.5), ("2 seconds", 2.0), (3, 3.0), (0.25, 0.25)],
)
def test_a_duration_param_reads_every_form(value, seconds):
    param = Param("wait", 1.0, "a wait", low=0.0, low_open=True, duration=True)
    assert param.parse(value, owner="thing") == pytest.approx(seconds)
    assert param.parse_flag(str(value)) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "fault"),
    [("2 parsecs", "is not a duration"), ("0s", "is out of range"), ("1e999s", "is not finite")],
)
def test_a_bad_duration_param_names_itself_the_value_and_the_forms(value, fault):
    param = Param("wait", 1.0, "a wait", low=0.0, low_open=True, duration=True)
    with pytest.raises(AdabatchError) as err:
        param.parse(value, owner="thing")
    message = str(err.value)
    assert message.startswith(f"thing parameter 'wait' = '{value}' {fault}: allowed seconds in")
    assert "1500ms" in message and "'2 seconds'" in message


def test_a_plain_number_param_still_refuses_units():
    with pytest.raises(AdabatchError, match="is not a number"):
        Param("rho", 0.7, "slack").parse("2s", owner="thing")
