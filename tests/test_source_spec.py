"""``--source``/``--to`` specs: the forms, their options for the data source, the errors
(one line naming the value and the allowed forms), and how run, compare and bench take
them before Spark is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adabatch.errors import AdabatchError
from adabatch.runs.source_spec import parse_source, parse_target, source_options
from adabatch.runs.spark_job import RunConfig, _source_options, check_run
from adabatch.sources.generator import SPARK_SCHEMA

FORMS = "allowed generator, files:DIR or redis://HOST:PORT[/DB]/STREAM"


def test_generator_is_the_default_form_and_not_live() -> None:
    for text in ("generator", " Generator "):
        spec = parse_source(text)
        assert (spec.name, spec.options, spec.text, spec.live) == (
            "generator",
            (),
            "generator",
            False,
        )


def test_files_names_an_absolute_directory_in_json_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = parse_source("files:landing/today")
    assert spec.name == "files" and spec.live
    assert dict(spec.options) == {"path": str(tmp_path / "landing" / "today"), "format": "json"}
    assert spec.text == f"files:{tmp_path / 'landing' / 'today'}"
    assert parse_source(spec.text) == spec  # the canonical form parses to itself
    assert parse_target("FILES:landing/today") == spec


@pytest.mark.parametrize(
    ("text", "url", "stream"),
    [
        ("redis://127.0.0.1:6379/3/clicks", "redis://127.0.0.1:6379/3", "clicks"),
        ("redis://127.0.0.1:6379/clicks", "redis://127.0.0.1:6379/0", "clicks"),
        ("redis://localhost/clicks", "redis://localhost:6379/0", "clicks"),
        ("redis://h:1/0/app:events/eu", "redis://h:1/0", "app:events/eu"),
        ("redis://h:1/7", "redis://h:1/0", "7"),
    ],
)
def test_redis_forms(text: str, url: str, stream: str) -> None:
    spec = parse_source(text)
    assert spec.name == "redis" and spec.live
    assert dict(spec.options) == {"url": url, "stream": stream}
    assert spec.text == f"{url}/{stream}"
    assert parse_target(text) == spec


def test_a_redis_password_never_shows() -> None:
    spec = parse_source("redis://:hunter2@127.0.0.1:6379/1/s")
    assert spec.option("url") == "redis://:hunter2@127.0.0.1:6379/1"  # the client needs it
    assert "hunter2" not in spec.shown
    with pytest.raises(AdabatchError) as bad:
        parse_source("redis://:hunter2@127.0.0.1:6379/1/bad key")
    assert "hunter2" not in str(bad.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("kafka://broker:9092/t", f"--source 'kafka://broker:9092/t' is not allowed: {FORMS}"),
        ("", f"--source '' is not allowed: {FORMS}"),
        ("files:", "names no directory"),
        ("files:  ", "names no directory"),
        ("redis://:6379/s", "names no host"),
        ("redis://h:99999/s", "has a bad port"),
        ("redis://h:0/s", "has port 0"),
        ("redis://h:6379/", "names no stream key"),
        ("redis://h:6379/0/", "names no stream key"),
        ("redis://h:6379/0/s?x=1", "has a query or fragment"),
        ("redis://h:6379/0/a b", "has stream key 'a b'"),
        ("redis://h:6379/0/" + "k" * 300, "keys are 1-256"),
        ("redis://h:6379/99999999/s", "names database 99999999"),
    ],
)
def test_bad_specs_are_one_line_naming_the_value(text: str, needle: str) -> None:
    with pytest.raises(AdabatchError) as bad:
        parse_source(text)
    assert needle in str(bad.value)
    assert "\n" not in str(bad.value)


def test_a_file_where_a_directory_belongs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(AdabatchError, match="exists and is not a directory"):
        parse_source(f"files:{tmp_path / 'f'}")


def test_a_producer_cannot_write_to_the_generator() -> None:
    with pytest.raises(
        AdabatchError,
        match=r"--to 'generator' is not allowed: allowed files:DIR or redis://HOST:PORT\[/DB\]/STREAM",
    ):
        parse_target("generator")


def test_source_options_carry_location_schema_and_overrides(tmp_path: Path) -> None:
    gen = source_options(parse_source("generator"), 7, 50, {"distribution": "zipf"})
    assert gen == {"seed": "7", "keys": "50", "distribution": "zipf"}
    files = parse_source(f"files:{tmp_path}")
    assert source_options(files, 7, 50) == {
        "path": str(tmp_path),
        "format": "json",
        "schema": SPARK_SCHEMA,
    }
    given = {"Format": "csv", "max_files_per_trigger": "3"}
    assert source_options(files, 7, 50, given) == {
        "path": str(tmp_path),
        "schema": SPARK_SCHEMA,
        "Format": "csv",
        "max_files_per_trigger": "3",
    }


def test_a_live_run_config_reads_its_source_and_keeps_the_profile_as_a_label(
    tmp_path: Path,
) -> None:
    cfg = RunConfig(
        workload="reduce",
        controller="static",
        profile="",
        duration_s=10.0,
        out_dir=tmp_path / "o",
        source="redis://:pw@127.0.0.1:6379/0/ev",
    )
    opts = _source_options(cfg)
    assert opts["source"] == "redis"
    assert (opts["url"], opts["stream"], opts["schema"]) == (
        "redis://:pw@127.0.0.1:6379/0",
        "ev",
        SPARK_SCHEMA,
    )
    assert "profile" not in opts and "seed" not in opts and "keys" not in opts
    assert opts["statePath"].endswith("adabatch-state.json")
    assert cfg.label == "redis://:***@127.0.0.1:6379/0/ev"
    labelled = RunConfig(**{**cfg.__dict__, "profile": "sine:1000:3000:60s"})
    assert labelled.label == "redis://:***@127.0.0.1:6379/0/ev (sine:1000:3000:60s)"
    assert _source_options(labelled)["profile"] == "sine:1000:3000:60s"


def test_a_generator_run_needs_a_profile(tmp_path: Path) -> None:
    cfg = RunConfig(
        workload="reduce", controller="static", profile="", duration_s=10, out_dir=tmp_path
    )
    with pytest.raises(AdabatchError, match=r"needs a rate profile \(--profile\)"):
        check_run(cfg)
    ok = RunConfig(**{**cfg.__dict__, "profile": "constant:10"})
    assert _source_options(ok)["source"] == "generator"
    assert (_source_options(ok)["seed"], _source_options(ok)["keys"]) == ("0", "1000")
    assert ok.label == "constant:10"


# ------------------------------------------------------------------ the command line

WITHOUT_SPARK = (
    "import sys\n"
    "for name in ('pyspark', 'pyarrow', 'py4j'):\n"
    "    sys.modules[name] = None\n"
    "from adabatch.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
RUN = ["--workload", "reduce", "--duration", "10s", "--out", "o"]


def cli(*args: str, cwd: Path, without_spark: bool = True) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", WITHOUT_SPARK] if without_spark else [sys.executable, "-m"]
    if not without_spark:
        argv.append("adabatch.cli")
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=dict(os.environ)
    )


def one_line(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, res
    assert "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("adabatch: error: ")
    return res.stderr


@pytest.mark.parametrize(
    "command", [["run", "--controller", "static"], ["compare", "--controllers", "static,pid"]]
)
def test_run_and_compare_check_the_source_before_spark(command: list[str], tmp_path: Path) -> None:
    bad = cli(*command, *RUN, "--source", "kafka://b/t", "--profile", "constant:10", cwd=tmp_path)
    assert "--source 'kafka://b/t' is not allowed" in one_line(bad)
    no_profile = cli(*command, *RUN, cwd=tmp_path)
    assert "--profile is required with --source generator" in one_line(no_profile)
    # a live source needs no profile: every input passes, and the spark extra is next
    live = cli(*command, *RUN, "--source", "redis://127.0.0.1:6379/0/ev", cwd=tmp_path)
    assert "pip install 'adabatch[spark]'" in one_line(live)
    # a landing directory too: compare starts each controller's run at latest
    files = cli(*command, *RUN, "--source", f"files:{tmp_path / 'in'}", cwd=tmp_path)
    assert "pip install 'adabatch[spark]'" in one_line(files)
    assert not (tmp_path / "o").exists()


def test_runs_one_after_another_read_only_what_arrives_during_each(tmp_path: Path) -> None:
    from adabatch.runs.compare import for_sequential_runs

    base = RunConfig("reduce", "static", "", 10.0, tmp_path, source="redis://h:1/0/s")
    assert dict(for_sequential_runs(base, "x").source_options) == {"starting_position": "latest"}
    given = RunConfig(**{**base.__dict__, "source_options": {"startingPosition": "earliest"}})
    assert for_sequential_runs(given, "x") == given
    plain = RunConfig(**{**base.__dict__, "source": "generator", "profile": "constant:1"})
    assert for_sequential_runs(plain, "x") == plain
    files = RunConfig(**{**base.__dict__, "source": f"files:{tmp_path}"})
    assert dict(for_sequential_runs(files, "x").source_options) == {"starting_position": "latest"}
    own = RunConfig(**{**files.__dict__, "source_options": {"starting_position": "earliest"}})
    assert for_sequential_runs(own, "x") == own


def test_bench_refuses_a_live_source_for_experiments_that_cannot_take_it(tmp_path: Path) -> None:
    src = ["--source", "redis://:hunter2@127.0.0.1:6379/0/ev"]
    keys = cli("bench", "keys", "--quick", "--out", "o", *src, cwd=tmp_path, without_spark=False)
    err = one_line(keys)
    assert "experiment keys sets generator options (keys_profile)" in err
    assert "hunter2" not in err
    full = cli("bench", "static-vs-adaptive", "--out", "o", *src, cwd=tmp_path, without_spark=False)
    assert "compares 8 rate profiles" in one_line(full)
    bad = cli("bench", "timeline", "--out", "o", "--source", "x", cwd=tmp_path, without_spark=False)
    assert "--source 'x' is not allowed" in one_line(bad)
    # a landing directory is not refused for runs one after another (each starts at
    # latest): keys is refused for its generator options, as on Redis
    land = f"files:{tmp_path / 'in'}"
    keys = ["bench", "keys", "--quick", "--out", "o", "--source", land]
    err = one_line(cli(*keys, cwd=tmp_path, without_spark=False))
    assert "experiment keys sets generator options (keys_profile)" in err
    assert err.rstrip().endswith(f"it runs on the generator only, not on {land}")
    assert not (tmp_path / "o").exists()


def test_the_bench_command_line_names_a_live_source_without_its_password() -> None:
    from argparse import Namespace

    from adabatch.commands.bench import _command

    args = Namespace(
        experiment="timeline", quick=True, out="o", master="local[2]", seed=0, docs=None,
        source="redis://:hunter2@127.0.0.1:6379/0/ev",
    )  # fmt: skip
    line = _command(args)
    assert "--source 'redis://:***@127.0.0.1:6379/0/ev'" in line
    assert "hunter2" not in line
    assert "--source" not in _command(Namespace(**{**vars(args), "source": "generator"}))


def test_bench_runs_read_the_source_each_from_its_start(tmp_path: Path) -> None:
    from adabatch.bench import runner
    from adabatch.bench.model import Config, Settings

    config = Config(
        "fp", workload="reduce", controller="fixed-point", profile="constant:9", duration_s=5
    )
    settings = Settings(tmp_path, seed=4)
    src = "redis://:hunter2@127.0.0.1:6379/0/ev"
    cfg = runner._run_config(config, tmp_path / "fp", settings, src)
    assert (cfg.source, cfg.profile, cfg.seed) == (src, "constant:9", 4)
    assert dict(cfg.source_options) == {"starting_position": "latest"}
    assert runner._run_config(config, tmp_path, settings, "generator").source == "generator"
    written = runner._config_dict(config, src)
    assert written["source"] == "redis://:***@127.0.0.1:6379/0/ev"
    assert "source" not in runner._config_dict(config, "generator")  # earlier runs still match


def test_a_restart_checks_the_saved_query_with_the_cores_spark_filled_in(tmp_path: Path) -> None:
    from adabatch.runs.spark_job import _source_options
    from adabatch.streaming.options import parse_options
    from adabatch.streaming.state import save_state

    def cfg(**params: str) -> RunConfig:
        return RunConfig(
            workload="reduce",
            controller="isotonic",
            profile="constant:10",
            duration_s=10,
            out_dir=tmp_path,
            params=params,
        )

    # what the stream saved: read_stream filled cores from Spark's parallelism
    query = parse_options(_source_options(cfg(cores="2"))).fingerprint()
    save_state(cfg().state_path, {"query": query})
    check_run(cfg())  # cores left to Spark, as in the first run: the same query
    check_run(cfg(cores="2"))
    with pytest.raises(AdabatchError, match="different query: params"):
        check_run(cfg(cores="3"))
    with pytest.raises(AdabatchError, match="different query: params"):
        check_run(cfg(cores="2", initial_interval="0.5"))
