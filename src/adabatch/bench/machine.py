"""What a bench result says about the machine it ran on.

Both benches record the same facts: :func:`machine_facts` for the results page of
``adabatch bench`` (cores, memory, versions, date) and :func:`run_facts` for the deadline
bench's ``results.json`` (cores, Python, platform, start time, load averages), whose
measured times only compare on an equally loaded machine.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def cores() -> int | None:
    """The number of CPUs the operating system reports."""
    return os.cpu_count()


def load_avg() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages (the machine may be shared)."""
    return os.getloadavg()


def _memory() -> str | None:
    """Total memory; ``None`` when /proc/meminfo has no total."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        return "unknown"
    return None


def _java() -> str:
    try:
        proc = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
        )
        return (proc.stderr or proc.stdout).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def _spark() -> str:
    try:
        import pyspark
    except ImportError:
        return "not installed"
    return pyspark.__version__


def machine_facts() -> dict[str, str]:
    """Cores, memory, Python/Java/Spark versions and the date, for the results page."""
    facts = {"cores": str(cores())}
    memory = _memory()
    if memory is not None:
        facts["memory"] = memory
    facts["python"] = platform.python_version()
    facts["java"] = _java()
    facts["spark"] = _spark()
    facts["os"] = platform.platform()
    facts["date"] = dt.date.today().isoformat()
    return facts


def run_facts() -> dict[str, Any]:
    """Cores, Python, platform, start time and load averages at the start of a run
    (``results.json``'s ``machine``; the run adds ``load_avg_end``)."""
    return {
        "cpus": cores(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_avg_start": load_avg(),
    }
