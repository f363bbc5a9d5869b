"""``adabatch bench``: the papers' experiments on real Spark."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from adabatch.bench import model, page, registry, runner
from adabatch.bench.machine import machine_facts
from adabatch.commands import Command
from adabatch.commands.args import parse_int
from adabatch.errors import AdabatchError
from adabatch.runs.source_spec import SOURCE_FORMS, SourceSpec, parse_source
from adabatch.urls import redact_url

NAME = "bench"
HELP = "run an experiment (or all) on real Spark: metrics, summaries.csv, figures, Markdown"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("experiment", help=f"all, or one of: {', '.join(registry.names())}")
    parser.add_argument("--out", required=True, help="output root (writes OUT/EXPERIMENT/)")
    parser.add_argument("--quick", action="store_true", help="short CI version; asserts headline")
    parser.add_argument("--master", default="local[2]", help="Spark master URL")
    parser.add_argument("--seed", default="0", help="generator seed (integer >= 0)")
    parser.add_argument(
        "--source",
        default="generator",
        help=f"where every run reads records from: {SOURCE_FORMS} (a live source needs a "
        "producer running meanwhile, e.g. adabatch produce)",
    )
    parser.add_argument(
        "--docs",
        default=None,
        help="publish into DOCS/results.md and DOCS/results/: bench all writes the page "
        "afresh (default: into OUT), one experiment replaces only its own part of it "
        "(default: nowhere); the repository's docs/ is written only when named",
    )
    parser.add_argument("--force", action="store_true", help="replace an earlier run in OUT")
    parser.add_argument("--resume", action="store_true", help="reuse finished configs in OUT")
    parser.add_argument(
        "--only",
        metavar="PATTERN",
        default=None,
        help="run only the configs whose names match this shell pattern (e.g. 'reduce-*'); "
        "the analysis comes once every config is finished in OUT (with --resume)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _command(args: argparse.Namespace) -> str:
    """The exact command, rebuilt from the parsed arguments (for the results page)."""
    parts = ["adabatch", "bench", args.experiment]
    if args.quick:
        parts.append("--quick")
    parts += ["--out", args.out, "--master", redact_url(args.master), "--seed", str(args.seed)]
    source = parse_source(getattr(args, "source", "generator"))
    if source.live:
        parts += ["--source", source.shown]
    if args.docs is not None:
        parts += ["--docs", args.docs]
    return " ".join(shlex.quote(p) for p in parts)


def _print_result(result: model.ExperimentResult) -> None:
    print(f"{result.experiment.name}: {len(result.outcomes)} configs, {result.wall_s:.0f} s")
    for v in result.analysis.verdicts:
        mark = "ok  " if v.holds else "FAIL" if v.headline else "no  "
        print(f"  [{mark}] {v.claim}" + (f" ({v.evidence})" if v.evidence else ""))
    print(f"  section: {result.section}")
    print(f"  summaries: {result.csv}")


def _producer_hint(
    experiment: model.Experiment, settings: model.Settings, source: SourceSpec
) -> str:
    """What the producer of a live source should send while the experiment runs."""
    configs = list(experiment.configs(settings))
    runs_s = sum(c.duration_s for c in configs) + experiment.session_warmup_s(settings)
    profile = configs[0].profile if configs else "?"
    return (
        f"{experiment.name} reads {source.shown}: its runs assume a producer sending "
        f"{profile} for at least {runs_s:.0f} s plus Spark's start-ups, e.g. adabatch "
        f"produce --to {source.shown} --profile {profile} --duration {runs_s * 1.5:.0f}s"
    )


def _print_partial(part: model.PartialRun) -> None:
    name = part.experiment.name
    print(
        f"{name}: {len(part.ran)} config(s) matching {part.only!r} done; {part.finished} of "
        f"{part.total} configs finished in {part.dir}. The analysis runs once all are: "
        "the same command with --resume, and --only for the rest or none"
    )


def run(args: argparse.Namespace) -> int:
    if args.force and args.resume:
        msg = "--force and --resume exclude each other"
        raise AdabatchError(msg)
    only = getattr(args, "only", None)
    if only is not None and args.experiment == "all":
        msg = f"--only {only!r} selects configs of one experiment; allowed with one, not all"
        raise AdabatchError(msg)
    source = parse_source(args.source)
    settings = model.Settings(
        out=Path(args.out),
        quick=args.quick,
        seed=parse_int(args.seed, "--seed", 0),
        master=args.master,
        command=_command(args),
    )
    kwargs = {
        "force": args.force,
        "resume": args.resume,
        "progress": not args.no_progress,
        "source": source.text,
    }
    if args.experiment == "all":
        docs_dir = Path(args.docs) if args.docs is not None else settings.out
        results, written, skipped = runner.run_all(settings, docs_dir=docs_dir, **kwargs)
        for result in results:
            _print_result(result)
        for line in skipped:
            print(f"not run: {line}")
        print(f"results page: {written}")
        if args.quick and skipped:
            return 1
    else:
        experiment = registry.get_experiment(args.experiment)
        if source.live:
            runner.check_source(experiment, list(experiment.configs(settings)), source.text)
            print(_producer_hint(experiment, settings, source))
        done = runner.run_experiment(experiment, settings, only=only, **kwargs)
        if isinstance(done, model.PartialRun):
            _print_partial(done)
            return 0
        results = [done]
        _print_result(results[0])
        if args.docs is not None:
            written = page.publish_experiment(results[0], Path(args.docs), facts=machine_facts())
            print(f"results page: {written}")
    failed = [(r, v) for r in results for v in r.failed_headlines]
    if args.quick and failed:
        for r, v in failed:
            print(
                f"adabatch: headline of {r.experiment.name} did not hold: {v.claim}",
                file=sys.stderr,
            )
        return 1
    return 0


COMMAND = Command(NAME, HELP, add_arguments, run)
