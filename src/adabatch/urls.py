"""URLs as they may be written down: a password in ``--master`` or ``--db`` never reaches a
summary, a config file, a results page or a progress line."""

from __future__ import annotations

import re

# ``scheme://user:password@host``: what follows the user name up to the last '@' of the
# authority is the password (it may itself hold ':' or '@'); found at any '://', so a
# nested URL (``k8s://https://user:password@host``) is covered too.
_PASSWORD = re.compile(r"(://[^/:@?#]*):[^/?#]*@")
# ``http(s)://TOKEN@host``: a user name alone there is an access token.
_TOKEN = re.compile(r"(?i)(https?://)[^/:@?#]+@")
# A password in the query string (``?password=...``, libpq and JDBC style).
_QUERY_SECRET = re.compile(r"(?i)([?&;](?:password|passwd|pwd|secret|token)=)[^&;#]*")


def redact_url(url: str | None) -> str | None:
    """``url`` with any password replaced by ``***``; ``None`` stays ``None``.

    Examples
    --------
    >>> redact_url("postgresql://user:secret@host/db")
    'postgresql://user:***@host/db'
    >>> redact_url("spark://host:7077")
    'spark://host:7077'
    >>> redact_url("local[*]")
    'local[*]'
    """
    if url is None:
        return None
    text = _PASSWORD.sub(r"\1:***@", str(url))
    text = _TOKEN.sub(r"\1***@", text)
    return _QUERY_SECRET.sub(r"\1***", text)
