"""The CLI's top level: one line and exit 2 for every failure a user or the machine can
cause, exit 1 with a hint only for a bug; inputs checked before the spark extra is
imported; pid-sweep's values through the shared validators; no password written down."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adabatch.cli import describe_failure, main
from adabatch.urls import redact_url

# Runs the CLI with the spark extra's modules made unimportable (as if never installed).
WITHOUT_SPARK = (
    "import sys\n"
    "for name in ('pyspark', 'pyarrow', 'py4j'):\n"
    "    sys.modules[name] = None\n"
    "from adabatch.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def cli(*args: str, code: str | None = None, env: dict[str, str] | None = None, cwd=None):
    argv = [sys.executable, "-c", code] if code else [sys.executable, "-m", "adabatch.cli"]
    return subprocess.run(
        [*argv, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def assert_one_line(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith("adabatch: error: ")


# ------------------------------------------------------------------ failure classes


def test_each_failure_class_is_one_line_with_the_right_status(tmp_path: Path) -> None:
    def caught(action) -> BaseException:
        try:
            action()
        except BaseException as exc:  # the exception is the test's input
            return exc
        raise AssertionError("no exception")

    missing = tmp_path / "no-such.csv"
    cases = [
        (caught(lambda: missing.open()), 2, str(missing)),
        (caught(lambda: math.exp(1e6)), 2, "too large or too small"),
        (caught(lambda: 1 / 0), 2, "too large or too small"),
        (caught(lambda: b"\xff\xfe".decode("utf-8")), 2, "not UTF-8"),
        (caught(lambda: json.loads("[" * 100_000)), 2, "nested too deeply"),
        (MemoryError(), 2, "out of memory"),
        (caught(lambda: {}["bug"]), 1, "please report it"),
    ]
    for exc, status, needle in cases:
        line, got = describe_failure(exc)
        assert got == status, (exc, line)
        assert needle in line
        assert "\n" not in line


def test_overflowing_input_is_exit_2_without_traceback(tmp_path: Path) -> None:
    res = cli(
        "simulate",
        "--workload",
        "reduce",
        "--controller",
        "static",
        "--profile",
        "constant:1e308",
        "--duration",
        "60s",
        "--out",
        str(tmp_path / "out"),
    )
    assert res.returncode == 2
    assert_one_line(res.stderr)
    assert "'1e308'" in res.stderr


BUGGY = (
    "import sys\n"
    "import adabatch.commands.controllers as c\n"
    "c.catalogue = lambda: {}['no-such-key']\n"  # a bug inside a command
    "from adabatch.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_an_internal_error_is_exit_1_with_a_hint_and_a_traceback_on_request() -> None:
    res = cli("controllers", code=BUGGY)
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    assert "internal error (KeyError" in res.stderr
    assert "please report it" in res.stderr
    debug = cli("controllers", code=BUGGY, env={"ADABATCH_DEBUG": "1"})
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr


def test_argparse_usage_errors_still_exit_2(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["simulate", "--no-such-option"])
    assert stop.value.code == 2


# ------------------------------------------------------------------ spark extra


SPARK_ARGS = ["--workload", "reduce", "--profile", "constant:100", "--duration", "10s"]


def test_run_checks_the_controller_before_importing_spark(tmp_path: Path) -> None:
    res = cli(
        "run", "--controller", "nosuch", *SPARK_ARGS, "--out", "o", code=WITHOUT_SPARK, cwd=tmp_path
    )
    assert res.returncode == 2
    assert_one_line(res.stderr)
    assert "unknown controller 'nosuch'" in res.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "bad",
    [
        ["--param", "blocks=1e18"],
        ["--profile", "markov:1,2:1e-300"],
        ["--duration", "1e9"],
        ["--warmup", "20s"],
        ["--queue", "lifo"],
    ],
)
def test_run_checks_params_profile_and_durations_before_spark(
    bad: list[str], tmp_path: Path
) -> None:
    args = ["run", "--controller", "static", *SPARK_ARGS, *bad, "--out", "o"]
    res = cli(*args, code=WITHOUT_SPARK, cwd=tmp_path)
    assert res.returncode == 2
    assert_one_line(res.stderr)
    assert "spark extra" not in res.stderr


def test_compare_checks_every_controller_before_importing_spark(tmp_path: Path) -> None:
    args = ["compare", "--controllers", "static,nosuch", *SPARK_ARGS, "--out", "o"]
    res = cli(*args, code=WITHOUT_SPARK, cwd=tmp_path)
    assert res.returncode == 2
    assert "unknown controller 'nosuch'" in res.stderr


def test_a_missing_spark_extra_says_how_to_install_it(tmp_path: Path) -> None:
    for command in (["run", "--controller", "static"], ["compare", "--controllers", "static,pid"]):
        res = cli(*command, *SPARK_ARGS, "--out", "o", code=WITHOUT_SPARK, cwd=tmp_path)
        assert res.returncode == 2
        assert_one_line(res.stderr)
        assert "pip install 'adabatch[spark]'" in res.stderr


# ------------------------------------------------------------------ pid-sweep


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--target", "abc", "--target 'abc' is not a number"),
        ("--target", "1e308", "--target '1e308': allowed"),
        ("--interval", "0", "--interval '0': allowed"),
        ("--iterations", "5", "--iterations '5': allowed an integer from 20"),
        ("--iterations", "1e9", "--iterations '1e9' is not an integer"),
        ("--iterations", "100000", "allowed at most 20,000,000 batches"),
        ("--kp", "0:1:1e-9", "more than 1000 values"),
        ("--kd", "1e308", "kd = 1e+308 is not allowed"),
    ],
)
def test_pid_sweep_values_go_through_the_validators(
    option: str, value: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["pid-sweep", option, value, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert err.count("\n") == 1
    assert "usage:" not in err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ redaction


@pytest.mark.parametrize(
    ("url", "written"),
    [
        ("postgresql://user:secret@host/db", "postgresql://user:***@host/db"),
        ("postgresql://user:se:c@ret@host:5432/db", "postgresql://user:***@host:5432/db"),
        ("postgresql://postgres@127.0.0.1:5432/test", "postgresql://postgres@127.0.0.1:5432/test"),
        ("k8s://https://admin:pw@api:443", "k8s://https://admin:***@api:443"),
        ("spark://host:7077", "spark://host:7077"),
        ("https://TOKEN@example.org/x", "https://***@example.org/x"),
        ("postgresql://h/db?user=a&password=s3", "postgresql://h/db?user=a&password=***"),
        ("local[*]", "local[*]"),
    ],
)
def test_redact_url(url: str, written: str) -> None:
    assert redact_url(url) == written


def test_the_bench_command_line_and_configs_hide_the_master_password() -> None:
    from argparse import Namespace

    from adabatch.bench.experiments.deadline import BenchConfig
    from adabatch.commands.bench import _command

    master = "spark://admin:hunter2@cluster:7077"
    args = Namespace(experiment="x", quick=False, out="o", master=master, seed=0, docs="d")
    assert "hunter2" not in _command(args)
    assert "hunter2" not in json.dumps(BenchConfig(out=Path("o"), master=master).to_json())


def test_a_bad_database_url_message_hides_the_password(capsys: pytest.CaptureFixture) -> None:
    from adabatch.errors import AdabatchError
    from adabatch.workloads.sinks import parse_db_url

    with pytest.raises(AdabatchError) as err:
        parse_db_url("mysql://user:hunter2@host/db")
    assert "hunter2" not in str(err.value)
    assert "user:***@host" in str(err.value)
