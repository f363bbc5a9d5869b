"""``adabatch bench`` arguments: the repository's docs are written only when named."""

from __future__ import annotations

from adabatch.cli import build_parser
from adabatch.commands.bench import _command


def test_bench_all_publishes_into_out_unless_docs_is_named() -> None:
    args = build_parser().parse_args(["bench", "all", "--quick", "--out", "o"])
    assert args.docs is None
    assert "--docs" not in _command(args)
    named = build_parser().parse_args(["bench", "all", "--out", "o", "--docs", "docs"])
    assert _command(named).endswith("--docs docs")
