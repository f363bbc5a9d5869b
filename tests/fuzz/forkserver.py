"""A fork server for the fuzz suite: imports ``adabatch.cli`` once, then runs each requested
``adabatch`` invocation in a forked child with resource limits.

Run as a script (``python forkserver.py``); it reads one JSON request per line on stdin and
writes one JSON reply per line on stdout, as children finish (several may run at once).

Request: ``{"id", "argv", "cwd", "stdout", "stderr", "env", "wall_s", "cpu_s", "mem_bytes",
"fsize_bytes"}``. Reply: ``{"id", "status", "signal", "timed_out", "wall_s"}`` where
``status`` is the exit status (``None`` when a signal ended the child).

The child behaves like ``python -m adabatch.cli ARGV`` (``sys.exit(main())``): an exception
that escapes ``main`` prints a traceback and exits 1; ``SystemExit`` keeps its status.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import resource
import select
import signal
import sys
import time
import traceback
from typing import Any


def _preload() -> None:
    """Import what every command imports, so a forked child starts in milliseconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot
    import scipy.optimize  # noqa: F401
    import yaml  # noqa: F401

    from adabatch import cli

    cli.build_parser()
    gc.collect()
    gc.freeze()  # children then never touch (copy) the preloaded objects' pages for GC


def _exit_status(exc: SystemExit) -> int:
    """The status ``sys.exit`` gives the process for ``exc`` (as the interpreter does)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _child(req: dict[str, Any], close_fds: list[int]) -> None:
    """Runs in the forked child: limits, redirections, then the CLI. Never returns."""
    status = 1
    try:
        os.setpgid(0, 0)
        mem = int(req["mem_bytes"])
        cpu = int(req["cpu_s"])
        fsize = int(req["fsize_bytes"])
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for fd in close_fds:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.update(req["env"])
        import tempfile

        tempfile.tempdir = None  # TMPDIR was just changed
        # fresh text streams on fds 1 and 2, configured as a new interpreter would be
        enc, out_errors = sys.__stdout__.encoding, sys.__stdout__.errors
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), enc, out_errors)
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), enc, "backslashreplace", line_buffering=True
        )
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), enc, out_errors)
        sys.argv = ["adabatch", *req["argv"]]
        from adabatch.cli import main

        try:
            status = int(main(list(req["argv"])) or 0) & 0xFF
        except SystemExit as exc:
            status = _exit_status(exc)
        except BaseException:
            traceback.print_exc()
            status = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            status = 120  # what the interpreter does when flushing at exit fails
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
        status = 1
    os._exit(status)


def serve() -> None:
    """Read requests, fork a child for each, reply as each one ends (or is killed)."""
    _preload()
    reply_fd = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray prints never corrupt the protocol
    running: dict[int, tuple[int, dict[str, Any], float]] = {}  # pidfd -> pid, req, start
    pending = b""
    stdin_open = True
    while stdin_open or running:
        now = time.monotonic()
        waits = [start + float(req["wall_s"]) - now for _, req, start in running.values()]
        timeout = max(0.0, min(waits)) if waits else None
        watch = ([0] if stdin_open else []) + list(running)
        ready, _, _ = select.select(watch, [], [], timeout)
        if 0 in ready:
            chunk = os.read(0, 1 << 20)
            if not chunk:
                stdin_open = False
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                req = json.loads(line)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(req, [reply_fd, *running])
                running[os.pidfd_open(pid)] = (pid, req, time.monotonic())
        now = time.monotonic()
        for pidfd in list(running):
            pid, req, start = running[pidfd]
            timed_out = pidfd not in ready and now >= start + float(req["wall_s"])
            if pidfd not in ready and not timed_out:
                continue
            if timed_out:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
            _, wstatus = os.waitpid(pid, 0)
            os.close(pidfd)
            del running[pidfd]
            reply = {
                "id": req["id"],
                "status": os.waitstatus_to_exitcode(wstatus) if os.WIFEXITED(wstatus) else None,
                "signal": os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None,
                "timed_out": timed_out,
                "wall_s": round(time.monotonic() - start, 4),
            }
            os.write(reply_fd, (json.dumps(reply) + "\n").encode())


if __name__ == "__main__":
    serve()
