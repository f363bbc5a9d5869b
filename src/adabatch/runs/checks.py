"""The checks every run shares, simulated or on Spark, before anything runs."""

from __future__ import annotations

import math

from adabatch.errors import AdabatchError


def check_duration(duration_s: float, warmup_s: float) -> None:
    """A run's stream duration must be a positive number of seconds, and its warm-up (left
    out of the summary's means) at least 0 and shorter than the duration."""
    if not (duration_s > 0 and math.isfinite(duration_s)):
        msg = f"duration {duration_s!r} s is not allowed: allowed a positive number of seconds"
        raise AdabatchError(msg)
    if not 0 <= warmup_s < duration_s:
        msg = (
            f"warm-up {warmup_s!r} s is not allowed: allowed >= 0 and shorter than the "
            f"duration ({duration_s:g} s)"
        )
        raise AdabatchError(msg)
