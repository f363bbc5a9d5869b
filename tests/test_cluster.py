"""``adabatch cluster``: a real Spark standalone master and workers on loopback, a real
``adabatch run`` against them over files another process landed (exactly once: the
database's totals equal what landed; its cost must say "not measured", not the driver's
share), and what ``down`` leaves behind (nothing it made)."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from adabatch import cluster
from adabatch.cli import main
from adabatch.errors import AdabatchError
from adabatch.runs.produce import landed_totals

RUN_TIMEOUT_S = 300  # a loaded CI machine; the run itself is 15 s of stream time


def cli(*args: object, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``adabatch ARGS`` in a fresh process (as a user runs it)."""
    argv = [sys.executable, "-m", "adabatch.cli", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def two_free_ports() -> tuple[int, int]:
    first = cluster.free_port()
    second = cluster.free_port()
    while second == first:
        second = cluster.free_port()
    return first, second


def left_behind(directory: Path) -> list[str]:
    """Processes whose command line names ``directory`` (daemons, executors)."""
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if str(directory) in cmd:
            out.append(f"{proc.info['pid']}: {cmd[:120]}")
    return out


@pytest.mark.spark
def test_a_run_on_a_standalone_cluster_reports_the_cpu_as_not_measured(tmp_path, capsys):
    port, webui = two_free_ports()
    home = tmp_path / "cluster"
    argv = ["cluster", "up", "--port", str(port), "--webui-port", str(webui), "--dir", str(home)]
    took: dict[str, float] = {}
    landing = tmp_path / "landing"
    landing.mkdir()
    produce = [sys.executable, "-m", "adabatch.cli", "produce", "--to", f"files:{landing}"]
    producer = subprocess.Popen(
        [*produce, "--profile", "constant:1000", "--duration", "6s", "--file-every", "1s"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # lands its files while the cluster starts
    started = time.monotonic()
    try:
        assert main([*argv, "--workers", "2"]) == 0
        took["up"] = time.monotonic() - started
        master = f"spark://127.0.0.1:{port}"
        assert capsys.readouterr().out.strip().splitlines()[-1] == master
        assert main(argv) == 2
        assert f"a cluster is already up in '{home}' (master {master})" in capsys.readouterr().err
        assert main(["cluster", "up", "--port", str(port), "--dir", str(tmp_path / "b")]) == 2
        assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err
        assert main(["cluster", "status", "--json", "--dir", str(home)]) == 0
        found = json.loads(capsys.readouterr().out)
        assert found["up"] is True and found["master"]["aliveworkers"] == 2
        daemons = [(d["pid"], d["started"]) for d in found["state"]["daemons"]]
        assert len(daemons) == 3
        out = tmp_path / "run"
        assert producer.wait(120) == 0, producer.stderr.read()
        started = time.monotonic()
        run = cli(
            "run", "--master", master, "--workload", "reduce", "--controller", "fixed-point",
            "--source", f"files:{landing}", "--duration", "15s", "--out", out,
            timeout=RUN_TIMEOUT_S,
        )  # fmt: skip
        took["run"] = time.monotonic() - started
        assert run.returncode == 0, run.stderr[-2000:]
        summary = json.loads((out / "summary.json").read_text())
        assert summary["batches"] >= 1 and summary["records"] >= 6000
        # executors in other JVMs read the files: every landed record counted once
        with sqlite3.connect(out / "results.sqlite") as con:
            rows = con.execute("SELECT key, records, value_sum FROM adabatch_reduce_totals")
            totals = {int(k): (int(n), float(v)) for k, n, v in rows.fetchall()}
        assert totals == landed_totals(f"files:{landing}")
        assert summary["master"] == master
        assert summary["cpu_s"] is None
        assert summary["cpu_s_per_million_records"] is None
        assert summary["cpu_cores_used"] is None
        assert summary["cpu_measured"] is False
        assert summary["cpu_scope"] == (
            f"not measured: executors run outside this process (master {master})"
        )
        rows = [line.strip() for line in run.stdout.splitlines()]
        assert f"{'CPU s per million records':<30} not measured" in rows
        assert f"{'CPU cores used':<30} not measured" in rows
        assert f"{'CPU scope':<30} {summary['cpu_scope']}" in rows
        # the batches ran on the cluster's executors: the master saw the application
        info = cluster.master_info(f"http://127.0.0.1:{webui}")
        assert info is not None and len(info["completedapps"]) == 1
        assert info["completedapps"][0]["cores"] >= 1
    finally:
        if producer.poll() is None:
            producer.kill()
        started = time.monotonic()
        assert main(["cluster", "down", "--dir", str(home)]) == 0
        took["down"] = time.monotonic() - started
        with capsys.disabled():
            print(" ".join(f"{k} {v:.1f} s" for k, v in took.items()), end=" ")
    assert "stopped 3 daemon(s)" in capsys.readouterr().out
    assert not home.exists()  # up made it, down removed it
    for pid, created in daemons:
        assert not (psutil.pid_exists(pid) and psutil.Process(pid).create_time() == created)
    assert left_behind(home) == []


def test_up_refuses_a_port_in_use_and_creates_nothing(tmp_path, capsys):
    home = tmp_path / "cluster"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["cluster", "up", "--port", str(port), "--dir", str(home)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"--port {port}: port {port} on 127.0.0.1 is in use" in err
    assert not home.exists()


def test_up_says_when_java_is_missing(tmp_path, monkeypatch, capsys):
    home = tmp_path / "cluster"
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    assert main(["cluster", "up", "--dir", str(home)]) == 2
    assert "java is not installed" in capsys.readouterr().err
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert main(["cluster", "up", "--dir", str(home)]) == 2
    assert "has no bin/java" in capsys.readouterr().err
    assert not home.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "--workers '0'"),
        (["--workers", "65"], "--workers '65'"),
        (["--port", "70000"], "--port '70000'"),
        (["--memory", "lots"], "--memory 'lots' is not allowed: allowed e.g. 512m or 2g"),
        (["--port", "9000", "--webui-port", "9000"], "both 9000"),
        (["--timeout", "0"], "--timeout '0'"),
    ],
)
def test_up_names_a_bad_value(tmp_path, capsys, args, message):
    home = tmp_path / "cluster"
    assert main(["cluster", "up", *args, "--dir", str(home)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not home.exists()


def test_up_refuses_a_directory_with_files_it_did_not_make(tmp_path, capsys):
    home = tmp_path / "mine"
    home.mkdir()
    (home / "notes.txt").write_text("keep me")
    port, webui = two_free_ports()
    argv = ["cluster", "up", "--port", str(port), "--webui-port", str(webui), "--dir", str(home)]
    assert main(argv) == 2
    assert "holds files adabatch did not make" in capsys.readouterr().err
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]


def test_status_and_down_without_a_cluster(tmp_path, capsys):
    assert main(["cluster", "status", "--dir", str(tmp_path)]) == cluster.NOT_UP
    assert "no cluster in" in capsys.readouterr().out
    assert main(["cluster", "down", "--dir", str(tmp_path)]) == 0
    assert "nothing to stop" in capsys.readouterr().out


def test_down_of_a_stale_cluster_removes_only_what_up_made(tmp_path, capsys):
    home = tmp_path / "cluster"
    home.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a daemon that has ended (its pid is free)
    for name in ("pids", "logs"):
        (home / name).mkdir()
        (home / name / "f").write_text("x")
    (home / "theirs").mkdir()
    state = cluster.ClusterState(
        master="spark://127.0.0.1:1",
        web_ui="http://127.0.0.1:2",
        workers=1,
        cores=1,
        memory="1g",
        python=sys.executable,
        spark_home="/nowhere",
        daemons=(cluster.Daemon("master", 1, gone.pid, time.time() - 100),),
        made=("pids", "logs"),
    )
    (home / cluster.STATE_FILE).write_text(state.to_json())
    assert main(["cluster", "status", "--dir", str(home)]) == cluster.NOT_UP
    printed = capsys.readouterr().out
    assert "cluster NOT fully up" in printed and "NOT running" in printed
    assert main(["cluster", "down", "--dir", str(home)]) == 0
    assert "stopped 0 daemon(s)" in capsys.readouterr().out
    assert sorted(p.name for p in home.iterdir()) == ["theirs"]


def test_a_corrupt_state_file_is_one_line(tmp_path):
    (tmp_path / cluster.STATE_FILE).write_text("{not json")
    with pytest.raises(AdabatchError, match="is not a cluster state file"):
        cluster.status(tmp_path)


def test_the_daemons_run_this_python_on_loopback(tmp_path):
    spec = cluster.ClusterSpec(directory=tmp_path)
    env = cluster._environment(tmp_path, cluster.spark_home(), spec)
    assert env["PYSPARK_PYTHON"] == sys.executable
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["SPARK_WORKER_DIR"] == str(tmp_path / "work")
    assert (Path(env["SPARK_HOME"]) / "bin" / "spark-class").is_file()
    assert "spark.master.rest.enabled=false" in env["SPARK_MASTER_OPTS"]
