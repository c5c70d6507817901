"""`drvtma fuzz TARGET` (a campaign with a budget, a report and reproducers) and `drvtma repro FILE`."""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from ..fuzz import report
from ..fuzz.campaign import bound_by, run_campaign
from ..fuzz.shard import parse_devices, run_sharded
from ..fuzz.shrink import DEFAULT_DB, open_database
from ..fuzz.targets import get_target, target_names
from ..runtime.figures import record_figure

DEFAULT_OUT = "drvtma-fuzz"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="drvtma fuzz", description="Fuzz a TMA operation against its oracle: a summary table by dtype, rank, "
        "swizzle and fill, a Markdown and a JSON report, and a shrunk JSON reproducer per mismatch "
        "(`drvtma repro FILE` replays one).")
    p.add_argument("target", help=f"what to fuzz: {', '.join(target_names())} (or 'list')")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--examples", type=int, help="cases to check in all (default 1000 when no --seconds)")
    budget.add_argument("--seconds", type=float, help="check for this long (each shard)")
    p.add_argument("--seed", type=int, help="campaign seed (default: random, printed in the report)")
    p.add_argument("--spec", help="JSON file of your own tensor map (TensorMapSpec fields): fuzz coordinates, "
                   "data and bases for it instead of random maps")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"folder for reports and reproducers (default {DEFAULT_OUT})")
    p.add_argument("--db", default=None, help=f"hypothesis example database (default {DEFAULT_DB}, "
                   "or $DRVTMA_FUZZ_DB); known failures replay first")
    p.add_argument("--no-db", action="store_true", help="use no example database")
    p.add_argument("--devices", help="shard over GPUs: 'all' or device numbers such as 0,1 (one process each; "
                   "a number twice runs two shards on that device)")
    p.add_argument("--no-shrink", action="store_true", help="write reproducers of the failing cases as found")
    p.add_argument("--max-shrinks", type=int, default=5, help="failures to shrink (the rest are written as found)")
    p.add_argument("--shrink-seconds", type=float, default=60.0, help="time allowed to shrink one failure")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--fake-device", action="store_true", help="the oracle stands in for the GPU (tests the "
                   "campaign machinery without one; finds no hardware bugs)")
    return p


def _load_spec(path: str | None):
    if not path:
        return None
    from ..tma.spec import TensorMapSpec

    return TensorMapSpec.from_json(Path(path).read_text())



def fuzz_command(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.target == "list":
        for name in target_names():
            try:
                print(f"{name:<12} {get_target(name).description}")
            except ImportError as exc:  # a registered room that is not importable here
                print(f"{name:<12} (unavailable: {exc})")
        return 0
    try:
        target = get_target(args.target)
    except KeyError as exc:
        print(f"drvtma fuzz: {exc.args[0]}", file=sys.stderr)
        return 2
    options = target.configure(_load_spec(args.spec))
    seed = args.seed if args.seed is not None else secrets.randbelow(1 << 31)
    db_path = None if args.no_db else (args.db or str(DEFAULT_DB))
    campaign = dict(seed=seed, examples=args.examples, seconds=args.seconds, fake=args.fake_device,
                    shrink=not args.no_shrink, max_shrinks=args.max_shrinks, shrink_seconds=args.shrink_seconds)
    devices = parse_devices(args.devices)
    if devices:
        result = run_sharded(target.name, options, devices, database_path=db_path, **campaign)
    else:
        database = open_database(db_path) if db_path else None
        result = run_campaign(target, options, database=database, progress=not args.quiet, **campaign)
    out = Path(args.out)
    reproducers = report.write_reproducers(target, result, out)
    js, md = report.write_reports(result, out, reproducers)
    print(report.summary_table(result))
    print()
    print(report.headline(result))
    print(f"what bounds the rate: {bound_by(result.timing)}")
    print(f"reports: {md}, {js}")
    for path in reproducers:
        print(f"reproducer: {path}  (drvtma repro {path})")
    record_figure({"test": "fuzz_campaign", "target": target.name, "cases": result.cases, "size": result.size,
                   "unit": target.unit, "seconds": round(result.seconds, 3),
                   "per_second": round(result.per_second, 1), "size_per_second": round(result.size_per_second, 1),
                   "mismatches": result.mismatches, "seed": seed, "shards": result.shards,
                   "bound_by": bound_by(result.timing), "timing": result.timing})
    return 1 if result.mismatches or result.known_failures else 0


def repro_command(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="drvtma repro", description="Replay a reproducer written by `drvtma fuzz` "
                                "and print the diff. Exit 1 while the case still fails, 0 once it passes.")
    p.add_argument("file")
    p.add_argument("--fake-device", action="store_true", help="the oracle stands in for the GPU")
    args = p.parse_args(argv)
    recorded = report.read_reproducer(args.file)
    print(f"drvtma repro: target {recorded['target']}, "
          f"{'shrunk' if recorded.get('shrunk') else 'as found'} case from seed {recorded['campaign']['seed']}")
    print(recorded["describe"])
    outcome = report.replay(recorded, fake=args.fake_device)
    print()
    print(report.diff_text(outcome))
    if outcome.ok:
        print("\nthe case passes now (recorded: it failed)")
        return 0
    same = report.same_diff(recorded["result"], outcome)
    print("\nsame diff as recorded" if same else "\nthe diff differs from the recorded one", file=sys.stdout)
    return 1
