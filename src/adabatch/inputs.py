"""Reading a file a user named: a regular file of bounded size in UTF-8, or one line that
says what it is instead (missing, a directory, a FIFO, too large, not UTF-8)."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

from adabatch.errors import AdabatchError, shown


def read_text_file(path: str | Path, what: str, limit: int) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes; anything else (missing,
    a directory, a FIFO, too large, not UTF-8, unreadable) is one line naming ``what`` and
    the path. The file is checked with ``stat`` before it is opened, so a FIFO never blocks."""
    p = Path(path)
    name = shown(str(p))
    try:
        info = p.stat()
    except FileNotFoundError:
        msg = f"{what} {name} does not exist"
        raise AdabatchError(msg) from None
    except OSError as exc:
        msg = f"{what} {name} cannot be read: {exc.strerror or exc}"
        raise AdabatchError(msg) from None
    _check_regular(info, what, name, limit)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with io.FileIO(fd, "r") as fh:
            _check_regular(os.fstat(fh.fileno()), what, name, limit)  # replaced since stat
            data = fh.read(limit + 1)
    except OSError as exc:
        msg = f"{what} {name} cannot be read: {exc.strerror or exc}"
        raise AdabatchError(msg) from None
    if len(data) > limit:
        msg = f"{what} {name} grew past {limit} bytes while read: allowed at most {limit}"
        raise AdabatchError(msg)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = (
            f"{what} {name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}): allowed a UTF-8 file"
        )
        raise AdabatchError(msg) from None


JSON_LIMIT = 64 * 1024 * 1024
"""Largest JSON file a user may name (calibrations, cost profiles, results)."""


def read_json_file(path: str | Path, what: str, hint: str = "", limit: int = JSON_LIMIT) -> Any:
    """The parsed content of a JSON file a user named; a file :func:`read_text_file`
    refuses, or text that is not JSON, is one line naming ``what``, the path and ``hint``
    (what to do about it)."""
    text = read_text_file(path, what, limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        tail = f": {hint}" if hint else ""
        msg = f"{what} {shown(str(path))} is not valid JSON ({exc.msg}, line {exc.lineno}){tail}"
        raise AdabatchError(msg) from None


def _check_regular(info: os.stat_result, what: str, name: str, limit: int) -> None:
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
    }
    if not stat.S_ISREG(info.st_mode):
        kind = next((k for test, k in kinds.items() if test(info.st_mode)), "not a regular file")
        msg = f"{what} {name} is {kind}: allowed a regular file"
        raise AdabatchError(msg)
    if info.st_size > limit:
        msg = f"{what} {name} has {info.st_size} bytes: allowed at most {limit}"
        raise AdabatchError(msg)
