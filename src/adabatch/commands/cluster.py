"""``adabatch cluster up | down | status``: a Spark standalone cluster on this machine
(loopback only) to run ``adabatch run --master spark://127.0.0.1:PORT`` against."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from adabatch import cluster
from adabatch.commands import Command
from adabatch.commands.args import parse_bounded_int, parse_float

NAME = "cluster"
HELP = "start, stop or inspect a local Spark standalone cluster (master and workers)"


def _dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        default=str(cluster.DEFAULT_DIR),
        help=f"the cluster's pid, log and work directories (default {cluster.DEFAULT_DIR})",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start a master and workers on 127.0.0.1, wait for them")
    up.add_argument("--workers", default="2", help="number of workers (default 2)")
    up.add_argument("--port", default="7077", help="the master's port (default 7077)")
    up.add_argument("--webui-port", default="8080", help="the master's web UI (default 8080)")
    up.add_argument("--cores", default="1", help="cores per worker (default 1)")
    up.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    up.add_argument(
        "--timeout", default=str(cluster.DEFAULT_TIMEOUT_S), help="seconds to wait (default 90)"
    )
    _dir(up)
    _dir(sub.add_parser("down", help="stop the cluster and remove what up created"))
    status = sub.add_parser("status", help="what runs (exit 0 if up, 3 if not)")
    status.add_argument("--json", action="store_true", help="print JSON")
    _dir(status)


def run(args: argparse.Namespace) -> int:
    if args.action == "up":
        return _up(args)
    if args.action == "down":
        state, stopped = cluster.down(Path(args.dir))
        if state is None:
            print(f"no cluster in {args.dir}: nothing to stop")
            return 0
        print(f"stopped {len(stopped)} daemon(s) of {state.master}; removed what up created")
        return 0
    found = cluster.status(Path(args.dir))
    if args.json:
        state = None if found.state is None else asdict(found.state)
        print(json.dumps({"up": found.up, "state": state, "master": found.master_info}))
    else:
        print("\n".join(found.lines()))
    return 0 if found.up else cluster.NOT_UP


def _up(args: argparse.Namespace) -> int:
    spec = cluster.ClusterSpec(
        workers=parse_bounded_int(args.workers, "--workers", 1, cluster.MAX_WORKERS),
        port=parse_bounded_int(args.port, "--port", 1, 65535),
        webui_port=parse_bounded_int(args.webui_port, "--webui-port", 1, 65535),
        cores=parse_bounded_int(args.cores, "--cores", 1, cluster.MAX_CORES),
        memory=args.memory,
        directory=Path(args.dir),
    )
    timeout = parse_float(args.timeout, "--timeout", 1.0, 3600.0)
    state = cluster.up(spec, timeout_s=timeout, echo=print)
    print(f"cluster up: {state.workers} worker(s), web UI {state.web_ui}")
    print(f"stop it with: adabatch cluster down --dir {args.dir}")
    print(state.master)
    return 0


COMMAND = Command(NAME, HELP, add_arguments, run)
