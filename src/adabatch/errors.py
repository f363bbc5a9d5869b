"""The one exception type users see (bad input, named value, allowed values) and the two
helpers every message uses: a clipped view of a user's value, and the name check for
values that become paths."""

from __future__ import annotations

import re
from typing import Any

# Longest view of a user's value in a message: a 760 MB YAML alias must not be repr()-ed.
MAX_SHOWN = 200

# Identifiers that become file or directory names (query ids, stream names, run names).
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_NAME = re.compile(NAME_PATTERN)


class AdabatchError(ValueError):
    """Bad input or an impossible request; the message is one line fit for a user.

    The CLI prints it as ``adabatch: error: <message>`` and exits with status 2.
    """


def shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` for a message, at most ``limit`` characters (the rest elided).

    Containers are clipped before they are rendered, so a huge value costs no memory."""
    if isinstance(value, str | bytes):
        text = repr(value[: limit + 1])
    elif isinstance(value, dict | list | tuple | set):
        text = _clipped_container(value, limit)
    else:
        try:
            text = repr(value)
        except (RecursionError, ValueError):  # e.g. int too large to render
            text = f"<{type(value).__name__}>"
    text = " ".join(text.splitlines())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clipped_container(value: Any, limit: int) -> str:
    kind = type(value).__name__
    items = list(value.items())[:8] if isinstance(value, dict) else list(value)[:8]
    inner = ", ".join(
        f"{shown(k, 40)}: {shown(v, 40)}" if isinstance(value, dict) else shown(v, 40)
        for item in items
        for k, v in [item if isinstance(value, dict) else (None, item)]
    )
    more = ", ..." if len(value) > len(items) else ""
    return f"{kind}({inner}{more})"[: limit + 1]


def check_name(value: Any, what: str) -> str:
    """``value`` if it is a safe file name (``NAME_PATTERN``), else one-line error naming
    ``what``: ids that become paths can never climb out of the directory they live in."""
    if not isinstance(value, str) or _NAME.fullmatch(value) is None:
        msg = (
            f"{what} = {shown(value)} is not allowed: it becomes a file name, so it must be "
            "1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or "
            "digit"
        )
        raise AdabatchError(msg)
    return value
