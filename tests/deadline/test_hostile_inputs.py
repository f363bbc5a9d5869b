"""Hostile spec files and options of ``adabatch deadline``: one line, exit 2, nothing done.

Each case is a real file (or FIFO, directory) on disk and a real CLI call; the message
must name the file or option and the problem, and never echo a huge value whole.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adabatch.cli import main
from adabatch.deadline.core.multi import MAX_BATCHES
from adabatch.deadline.core.single import MAX_PLAN_BATCHES
from adabatch.deadline.core.spec_file import MAX_SPEC_BYTES, load_scenario, load_specs
from adabatch.errors import AdabatchError

GOOD = (
    "{id: a, window_start: 0, window_end: 10, deadline: 30, rate: 2, "
    "cost: {kind: linear, per_tuple: 0.1}}"
)


def spec_file(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI; assert exit 2 and a single ``adabatch: error:`` line; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("adabatch: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------------------------------
# Query ids become directory names


@pytest.mark.parametrize(
    "qid", ["../../../../etc/cron.d", "/home/x", "a b", ".hidden", "x" * 65, "a/b"]
)
def test_plan_refuses_ids_that_are_not_file_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], qid: str
) -> None:
    spec = spec_file(tmp_path, f"queries:\n  - {GOOD.replace('id: a', f'id: {qid!r}')}\n")
    err = one_line_error(capsys, ["deadline", "plan", str(spec)])
    assert "'queries[0].id'" in err and "not allowed" in err and str(spec) in err
    assert capsys.readouterr().out == ""


def test_run_refuses_a_climbing_id_before_building_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("adabatch.commands.deadline_spark")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    qid = os.path.relpath(victim, tmp_path / "out" / "partials")
    spec = spec_file(tmp_path, f"queries:\n  - {GOOD.replace('id: a', f'id: {qid!r}')}\n")
    data, out = tmp_path / "data", tmp_path / "out"
    argv = ["deadline", "run", str(spec), "--data", str(data), "--out", str(out), "--no-check"]
    err = one_line_error(capsys, argv)
    assert "'queries[0].id'" in err
    assert (victim / "keep.txt").read_text() == "mine"
    assert not data.exists() and not out.exists()


def test_a_duplicate_id_is_reported_against_the_id_field(tmp_path: Path) -> None:
    other = GOOD.replace("id: a", "id: b")
    spec = spec_file(tmp_path, f"queries:\n  - {GOOD}\n  - {other}\n  - {GOOD}\n")
    with pytest.raises(AdabatchError) as info:
        load_specs(spec)
    assert "field 'queries[2].id' = 'a'" in str(info.value)
    assert "queries[0] has it too" in str(info.value)


# ---------------------------------------------------------------------------------------
# What the spec path names, and what the file holds


def test_a_file_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes("queries: [{id: caf\u00e9}]\n".encode("latin-1"))
    err = one_line_error(capsys, ["deadline", "plan", str(spec)])
    assert str(spec) in err and "not UTF-8" in err and "0xe9" in err


def test_a_directory_named_as_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "spec.yaml"
    folder.mkdir()
    err = one_line_error(capsys, ["deadline", "simulate", str(folder)])
    assert "is a directory" in err and "does not exist" not in err


def test_a_fifo_named_as_spec_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    # a subprocess with a timeout: opening a FIFO with no writer would block forever
    proc = subprocess.run(
        [sys.executable, "-m", "adabatch.cli", "deadline", "plan", str(fifo)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "is a FIFO" in proc.stderr and proc.stderr.count("\n") == 1


def test_a_missing_file_still_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(capsys, ["deadline", "plan", "/nonexistent/spec.yaml"])
    assert "does not exist" in err


def test_a_spec_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    spec = tmp_path / "big.yaml"
    with spec.open("w", encoding="utf-8") as fh:
        fh.write(f"queries:\n  - {GOOD}\n")
        fh.write("#" * MAX_SPEC_BYTES + "\n")
    with pytest.raises(AdabatchError, match=f"allowed at most {MAX_SPEC_BYTES}"):
        load_specs(spec)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.yaml", "queries: " + "[" * 5000 + "]" * 5000 + "\n"),
        ("deep.json", '{"queries": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        ("deep.toml", "queries = " + "[" * 5000 + "]" * 5000 + "\n"),
        ("shallow.yaml", "queries: " + "[" * 40 + "]" * 40 + "\n"),
    ],
)
def test_deeply_nested_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    spec = spec_file(tmp_path, text, name)
    err = one_line_error(capsys, ["deadline", "plan", str(spec)])
    assert "nested" in err and "levels" in err


BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
"""


def test_a_yaml_alias_bomb_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = spec_file(tmp_path, BOMB + "queries: *h\n")
    err = one_line_error(capsys, ["deadline", "plan", str(spec)])
    assert "YAML aliases" in err and len(err) < 400


def test_an_aliased_value_is_clipped_in_the_message(tmp_path: Path) -> None:
    # 9**3 = 729 strings behind one field: under the expansion limit, never rendered whole
    anchors = (
        "defaults:\n  inputs: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
        "scheduler: {strategy: &b [" + ",".join(["*a"] * 9) + "]}\n"
    )
    query = GOOD.replace("deadline: 30", "deadline: [" + ",".join(["*b"] * 9) + "]")
    spec = spec_file(tmp_path, f"{anchors}queries:\n  - {query}\n")
    with pytest.raises(AdabatchError) as info:
        load_specs(spec)
    text = str(info.value)
    assert "field 'deadline' = list(" in text and "..." in text and len(text) < 400


# ---------------------------------------------------------------------------------------
# Numbers: YAML 1.1 floats, huge and non-finite values


def test_exponent_floats_without_a_dot_are_numbers(tmp_path: Path) -> None:
    text = (
        "queries:\n  - {id: a, window_start: 0, window_end: 1e3, deadline: 2e3, rate: 1e2,"
        " total: 1e5, cost: {kind: linear, per_tuple: 1e-3, overhead: '5e-1'}}\n"
    )
    (q,) = load_specs(spec_file(tmp_path, text))
    assert (q.window_end, q.deadline, q.total) == (1000.0, 2000.0, 100_000)
    assert q.cost.per_tuple == 1e-3 and q.cost.overhead == 0.5
    assert q.arrivals.rate == 100.0


@pytest.mark.parametrize(
    ("field", "value", "needles"),
    [
        ("deadline", "1e308", ["'deadline' = 1e+308", "from -1e+12 to 1e+12"]),
        ("deadline", "'1e308'", ["'deadline' = '1e308'", "from -1e+12 to 1e+12"]),
        ("window_start", "-1e308", ["'window_start' = -1e+308", "from -1e+12"]),
        ("window_end", "1e308", ["'window_end' = 1e+308"]),
        ("deadline", ".nan", ["'deadline' = nan", "finite"]),
        ("deadline", "-.inf", ["'deadline' = -inf", "finite"]),
        ("rate", "1e308", ["'rate' = 1e+308", "a rate from 0 to"]),
        ("rate", "1e15", ["holds 1e+16 tuples: allowed at most"]),
        ("total", "1e400", ["'total' = inf", "an integer from 1 to"]),
        ("total", "100000000000000000000", ["'total'", "an integer from 1 to"]),
        ("groups", "1e300", ["'groups'", "an integer from 1 to"]),
    ],
)
def test_huge_and_non_finite_numbers_get_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: str, needles: list[str]
) -> None:
    fields = {
        "id": "a",
        "window_start": "0",
        "window_end": "10",
        "deadline": "30",
        "rate": "2",
        "cost": "{kind: linear, per_tuple: 0.1}",
    }
    if field == "total":
        del fields["rate"]
    fields[field] = value
    query = "{" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}"
    spec = spec_file(tmp_path, f"queries:\n  - {query}\n")
    err = one_line_error(capsys, ["deadline", "plan", str(spec)])
    assert str(spec) in err
    for needle in needles:
        assert needle in err, (needle, err)


def test_an_earliest_completion_past_the_time_limit_is_still_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = GOOD.replace("rate: 2", "rate: 1e12")  # 1e13 tuples at 0.1 s: 1e12 s of work
    spec = spec_file(tmp_path, f"queries:\n  - {query}\n")
    err = one_line_error(capsys, ["deadline", "plan", str(spec)])
    assert "cannot meet their deadline" in err and "earliest achievable completion 1e+12" in err


def test_a_cost_that_overflows_is_one_line(tmp_path: Path) -> None:
    query = GOOD.replace("per_tuple: 0.1", "per_tuple: 1e307")
    spec = spec_file(tmp_path, f"queries:\n  - {query.replace('rate: 2', 'rate: 1e6')}\n")
    with pytest.raises(AdabatchError, match="costs inf s"):
        load_specs(spec)


def test_cost_expressions_stay_formulas(tmp_path: Path) -> None:
    for expr in ["__import__('os').getcwd()", "n.real", "-" * 5000 + "n", "n + " * 400 + "1"]:
        query = GOOD.replace("{kind: linear, per_tuple: 0.1}", f'{{kind: expr, expr: "{expr}"}}')
        with pytest.raises(AdabatchError) as info:
            load_specs(spec_file(tmp_path, f"queries:\n  - {query}\n"))
        assert "'cost'" in str(info.value) and len(str(info.value)) < 700


def test_side_files_are_checked_like_the_spec(tmp_path: Path) -> None:
    (tmp_path / "model.json").mkdir()
    (tmp_path / "arrivals.csv").write_bytes(b"time_s,count\n0,1\n\xff\xfe,2\n")
    cases = {
        "cost: model.json": "is a directory",
        "rate: {arrivals: arrivals.csv}": "not UTF-8",
    }
    for replacement, needle in cases.items():
        key = replacement.split(":")[0]
        old = "cost: {kind: linear, per_tuple: 0.1}" if key == "cost" else "rate: 2"
        spec = spec_file(tmp_path, f"queries:\n  - {GOOD.replace(old, replacement)}\n")
        with pytest.raises(AdabatchError) as info:
            load_specs(spec)
        assert needle in str(info.value) and f"'{key}'" in str(info.value)


# ---------------------------------------------------------------------------------------
# Bounded scheduling work


def test_a_poll_interval_below_a_millisecond_is_refused(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, f"scheduler: {{poll_s: 1e-300}}\nqueries:\n  - {GOOD}\n")
    with pytest.raises(
        AdabatchError, match=r"'poll_s' = 1e-300 is out of range: allowed .* >= 0\.001"
    ):
        load_scenario(spec)


def test_a_schedule_of_too_many_batches_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = (
        "{id: a, window_start: 0, window_end: 1e6, deadline: 3e6, rate: 1e6, "
        "cost: {kind: linear, per_tuple: 1e-6}}"
    )
    spec = spec_file(tmp_path, f"scheduler: {{c_max: 1e-5}}\nqueries:\n  - {query}\n")
    err = one_line_error(capsys, ["deadline", "simulate", str(spec)])
    assert f"allowed at most {MAX_BATCHES}" in err and "c_max" in err


# ---------------------------------------------------------------------------------------
# Options: strings validated by the shared validators, one line naming option and value

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deadline"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["simulate", "SPEC", "--seed", "-1"], "--seed '-1': allowed an integer from 0 to"),
        (["simulate", "SPEC", "--seed", "1e3"], "--seed '1e3' is not an integer"),
        (
            ["simulate", "SPEC", "--noise", "inf"],
            "--noise 'inf': allowed a finite number from 0 to",
        ),
        (["simulate", "SPEC", "--noise", "1e308"], "--noise '1e308': allowed"),
        (["simulate", "SPEC", "--rsf", "-1"], "--rsf '-1': allowed a finite number from 0 to"),
        (["simulate", "SPEC", "--c-max", "0"], "--c-max '0': allowed a finite number > 0"),
        (["simulate", "SPEC", "--strategy", "fifo"], "--strategy 'fifo': allowed one of llf"),
        (["simulate", "SPEC", "--time-trigger", "x"], "--time-trigger 'x': allowed one of"),
        (["plan", "SPEC", "--method", "simplex"], "--method 'simplex': allowed one of"),
        (["generate", "OUT", "--queries", "0"], "--queries '0': allowed an integer from 1"),
        (["generate", "OUT", "--queries", "10000000"], "--queries '10000000': allowed"),
        (["generate", "OUT", "--delta", "nan"], "--delta 'nan': allowed a finite number > 0"),
        (["generate", "OUT", "--c-max", "inf"], "--c-max 'inf': allowed a finite number"),
        (["generate", "OUT", "--strategy", "all"], "--strategy 'all': allowed one of"),
        (["generate", "OUT", "--seed", "x" * 500], "--seed 'xxxx"),
    ],
)
def test_bad_option_values_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    out = tmp_path / "scenario.yaml"
    spec = str(EXAMPLES / "paper-cases.yaml")
    argv = ["deadline", *(spec if a == "SPEC" else str(out) if a == "OUT" else a for a in argv)]
    err = one_line_error(capsys, argv)
    assert needle in err and len(err) < 400
    assert not out.exists()


def test_simulate_exits_2_after_printing_a_missed_deadline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tight = GOOD.replace("deadline: 30", "deadline: 10.05")  # the last tuple alone: 0.1 s
    spec = spec_file(tmp_path, f"queries:\n  - {tight}\n")
    assert main(["deadline", "simulate", str(spec), "--json"]) == 2
    captured = capsys.readouterr()
    assert '"all_met": false' in captured.out  # the results come first
    assert captured.err == ("adabatch: error: deadlines missed under 1 of 1 strategies (llf: a)\n")


def test_the_help_names_the_papers_time_trigger_and_our_default() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "adabatch.cli", "deadline", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "'always' is the paper's rule (Sec. 4.4" in text
    assert "'budget', ours and the default" in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["run", "--query", "q6", "--profile", "P", "--deadline-factor", "-1"],
            "--deadline-factor",
        ),
        (["run", "--query", "q6", "--profile", "P", "--deadline-factor", "nan"], "'nan'"),
        (["run", "--query", "q6", "--profile", "P", "--margin", "0.5"], "--margin '0.5'"),
        (["run", "--query", "q6", "--profile", "P", "--time-scale", "0"], "--time-scale '0'"),
        (["run", "--query", "q6", "--profile", "P", "--sf", "1e9"], "--sf '1e9'"),
        (["run", "--query", "q6", "--profile", "P", "--slots", "0"], "--slots '0'"),
        (["run", "--query", "q6", "--profile", "P", "--strategy", "x"], "--strategy 'x'"),
        (["profile", "--query", "q6", "--sizes", "0,4"], "--sizes '0'"),
        (["profile", "--query", "q6", "--sizes", ",".join(["1"] * 65)], "1 to 64"),
        (["profile", "--query", "q6", "--segments", "99"], "--segments '99'"),
        (["profile", "--query", "q6", "--rate", "-1"], "--rate '-1'"),
        (["baseline", "--query", "q6", "--deadline", "1e308"], "--deadline '1e308'"),
        (["bench", "--factors", "1,-2"], "--factors '-2'"),
        (["bench", "--margin", "inf"], "--margin 'inf'"),
    ],
)
def test_spark_subcommands_check_every_option_before_building_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    pytest.importorskip("adabatch.commands.deadline_spark")
    profile = tmp_path / "q6.json"
    profile.write_text("{}", encoding="utf-8")
    data, out = tmp_path / "data", tmp_path / "out"
    argv = [str(profile) if a == "P" else a for a in argv]
    argv = ["deadline", *argv, "--data", str(data), "--out", str(out)]
    err = one_line_error(capsys, argv)
    assert needle in err
    assert not data.exists() and not out.exists()


def test_a_single_query_plan_of_too_many_batches_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # processing barely outpaces arrival: Function 1 would cut a billion-second window
    # into millions of batches
    query = (
        "{id: a, window_start: 0, window_end: 1e9, deadline: 1000000010, rate: 1, "
        "cost: {kind: linear, per_tuple: 0.999999}}"
    )
    spec = spec_file(tmp_path, f"queries:\n  - {query}\n")
    err = one_line_error(capsys, ["deadline", "plan", str(spec), "--method", "milp"])
    assert "query 'a'" in err and f"allowed at most {MAX_PLAN_BATCHES}" in err


@pytest.mark.parametrize("name", ["digits.yaml", "digits.json"])
def test_an_integer_of_thousands_of_digits_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    digits = "9" * 5001
    text = f"queries: [{{id: a, total: {digits}}}]\n"
    if name.endswith(".json"):
        text = f'{{"queries": [{{"id": "a", "total": {digits}}}]}}'
    err = one_line_error(capsys, ["deadline", "plan", str(spec_file(tmp_path, text, name))])
    assert "an integer of more than 4300 digits" in err


def test_yaml_python_tags_are_still_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f'queries: !!python/object/apply:os.system ["touch {marker}"]\n'
    with pytest.raises(AdabatchError, match="could not determine a constructor"):
        load_specs(spec_file(tmp_path, text))
    assert not marker.exists()
