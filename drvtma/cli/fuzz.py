"""`drvtma fuzz TARGET` (a campaign with a budget, a report and reproducers) and `drvtma repro FILE`."""

from __future__ import annotations

import argparse
import cProfile
import pstats
import secrets
import sys
from pathlib import Path
from typing import Any, cast

from ..errors import DrvtmaError
from ..fuzz import report
from ..fuzz.campaign import bound_by, run_campaign
from ..fuzz.oracle_pool import MAX_WORKERS as MAX_ORACLE_WORKERS
from ..fuzz.shard import SHARD_FORMS, parse_devices, parse_shard, run_sharded
from ..fuzz.shrink import DEFAULT_DB, is_redis_url, local_db_path, open_database
from ..fuzz.targets import get_target, target_names
from ..fuzz.triton import MAX_SIGNATURES
from ..runtime.figures import record_figure, table_text
from .parser import (
    Parser,
    in_file,
    int_at_least,
    json_object,
    list_of,
    natural,
    out_dir,
    out_file_and_folder,
    seconds,
)

DEFAULT_OUT = "drvtma-fuzz"


def _device(text: str) -> str:
    if not text.isdigit():
        raise ValueError(text)
    return text


def _devices(text: str) -> str:
    """'all' or device numbers such as 0,1 (checked here; which exist is the driver's to say)."""
    if text.strip() != "all":
        list_of(_device, "'all' or device numbers such as 0,1")(text)
    return text


# A night at the fastest target's pace is under 10^10 cases; more is a typo that would run until killed
MAX_EXAMPLES = 10**10


def _database(text: str) -> str:
    """A Redis URL (redis://host:port/0), or a folder that exists or whose parent does: a typo in a shared
    database's path must not quietly start an empty database of its own."""
    if is_redis_url(text):
        return text
    path = Path(text)
    if not path.is_dir() and not path.absolute().parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: neither it nor its parent folder {str(path.parent)!r} exists; "
                                         "give the shared database's folder (create it first) or a Redis URL")
    return out_dir(text)


def _shard(text: str) -> str:
    """--shard's form, checked here (parse_shard's reason named); 'slurm' and 'k8s/N' read the environment once the
    arguments are parsed."""
    head, _, tail = text.strip().partition("/")
    if head == "k8s" and not tail.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: give {SHARD_FORMS}")
    if head != "k8s" and not (head == "slurm" and not tail):
        try:
            parse_shard(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return text


def _parser() -> Parser:
    p = Parser(
        prog="drvtma fuzz", description="Fuzz a TMA operation against its oracle: a summary table by dtype, rank, "
        "swizzle and fill, a Markdown and a JSON report, and a shrunk JSON reproducer per mismatch "
        "(`drvtma repro FILE` replays one). Exit status 1 when a mismatch is found.",
        epilog="examples:\n  drvtma fuzz list\n  drvtma fuzz loads --examples 2000 --seed 1\n"
               "  drvtma fuzz encode --seconds 30 --spec my_map.json --out reports\n"
               "  drvtma fuzz loads --fake-device --examples 100   (no GPU: tests the machinery only)\n"
               "  drvtma fuzz loads --examples 20000 --oracle-workers 6   (the oracle on 6 more cores)\n"
               "  drvtma fuzz loads --seed 7 --examples 8000 --shard slurm --out reports --db /shared/fuzz-db\n"
               "  drvtma fuzz merge reports   (one report from the shards' reports; see docs/campaigns.md)")
    p.add_argument("target", help=f"what to fuzz: {', '.join(target_names())} (or 'list'; 'merge DIR...' merges "
                   "shard reports)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--examples", type=int_at_least(1, high=MAX_EXAMPLES),
                        help="cases to check in all, >= 1 (default 1000 when no --seconds)")
    budget.add_argument("--seconds", type=seconds, help="check for this long, > 0 (each shard)")
    p.add_argument("--seed", type=natural, help="campaign seed >= 0 (default: random, printed in the report)")
    p.add_argument("--spec", type=in_file, help="JSON file of your own tensor map (an object of TensorMapSpec "
                   "fields): fuzz coordinates, data and bases for it instead of random maps")
    p.add_argument("--out", type=out_dir,
                   help=f"folder for reports and reproducers (default {DEFAULT_OUT})")
    p.add_argument("--db", default=None, type=_database, help=f"a shared example database: a folder (on a shared "
                   f"disk) or a Redis URL (redis://host:6379/0, needs drvtma[redis]), used with the local one "
                   f"({DEFAULT_DB}, or $DRVTMA_FUZZ_DB; alone by default); known failures replay first")
    p.add_argument("--no-db", action="store_true", help="use no example database")
    p.add_argument("--devices", type=_devices, help="shard over GPUs: 'all' or device numbers such as 0,1 (one "
                   "process each; a number twice runs two shards on that device): --shard per device, then merge")
    p.add_argument("--shard", type=_shard, help=f"run one of N disjoint parts of the campaign the seed defines: "
                   f"{SHARD_FORMS}. 'slurm': K = $SLURM_ARRAY_TASK_ID - $SLURM_ARRAY_TASK_MIN, N = "
                   f"$SLURM_ARRAY_TASK_COUNT; 'k8s/N': K = $JOB_COMPLETION_INDEX (Kubernetes Indexed Job). "
                   f"--examples counts all shards together, --seconds each shard; `drvtma fuzz merge` joins them")
    p.add_argument("--no-shrink", action="store_true", help="write reproducers of the failing cases as found")
    p.add_argument("--max-shrinks", type=natural, default=5, help="failures to shrink, >= 0 (the rest are "
                   "written as found)")
    p.add_argument("--shrink-seconds", type=seconds, default=60.0, help="time allowed to shrink one failure (> 0)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--require-coverage", type=natural, default=0, metavar="N", help="exit 1 unless every class of "
                   "the target's coverage universe was hit at least N times (default 0: report coverage only)")
    p.add_argument("--fake-device", action="store_true", help="the oracle stands in for the GPU (tests the "
                   "campaign machinery without one; finds no hardware bugs)")
    p.add_argument("--kernel", help="fuzz YOUR kernel instead of drvtma's probe (loads, stores, reductions): "
                   "path/to/file.py:run or module:run, a callable as drvtma.fuzz.kernel.LoadKernel / StoreKernel")
    p.add_argument("--strategy", default="drvtma", help="with --kernel: whose rules the maps follow, drvtma "
                   "(default), triton or cuda.core")
    p.add_argument("--signatures", type=int_at_least(0, high=MAX_SIGNATURES), default=0, metavar="N",
                   help="with --strategy triton: draw the element type, block and padding (what Triton compiles a "
                   "kernel for) from N of them, chosen by the seed, so N compiles serve the campaign (default 0: "
                   "every case draws its own)")
    p.add_argument("--max-boxes", type=int_at_least(1, high=4096), default=None, metavar="N",
                   help="loads targets: at most N boxes per case, one launch (default: 192 for loads, 16 for your "
                   "kernel's)")
    p.add_argument("--profile", type=out_file_and_folder, metavar="FILE", default=None,
                   help="profile this process's campaign (cProfile): the stats to FILE (python -m pstats FILE) and "
                   "the 12 functions that took the most of their own time on stdout, below the phases "
                   "'what bounds the rate' names (not with --devices)")
    p.add_argument("--oracle-workers", type=int_at_least(0, high=MAX_ORACLE_WORKERS), default=0, metavar="N",
                   help="loads, im2col, stores, reductions (also with --kernel): N more processes build the "
                   "cases, class them and compute the oracle's answers, batches ahead, while this one launches (or "
                   "calls your kernel) and compares (default 0: all here); the same cases and verdicts")
    return p


def _kernel_target(args, parser: Parser):
    """--kernel: the kernel-TARGET target, the reference checked (file, callable) before any case."""
    from ..fuzz.kernel import load_kernel
    from ..fuzz.user import DIRECTIONS, STRATEGIES

    if args.target not in DIRECTIONS:
        parser.error(f"--kernel: fuzzes {', '.join(DIRECTIONS)} with your kernel, not {args.target!r}")
    if args.strategy not in STRATEGIES:
        parser.error(f"--strategy: {args.strategy!r} is none of {', '.join(STRATEGIES)}")
    try:
        load_kernel(args.kernel)
    except DrvtmaError as exc:
        parser.error(f"--kernel: {exc}")
    return get_target(DIRECTIONS[args.target])


def _load_spec(path, parser: Parser):
    """--spec's TensorMapSpec; a usage error names the file and what is wrong with it."""
    if path is None:
        return None
    from ..tma.tiled.spec import TensorMapSpec

    what = 'an object of TensorMapSpec fields such as {"dtype": "f32", "shape": [64, 64], "box": [16, 16]}'
    try:
        return TensorMapSpec.from_dict(json_object(path, what))
    except argparse.ArgumentTypeError as exc:
        parser.error(f"--spec: {exc}")
    except (DrvtmaError, ValueError, TypeError) as exc:
        parser.error(f"--spec: {path} is not a tensor-map spec: {exc}")


def fuzz_command(argv: list[str]) -> int:
    parser = _parser()
    if argv[:1] == ["merge"]:
        return merge_command(argv[1:])
    args = parser.parse_args(argv)
    if args.devices and args.shard:
        parser.error("--shard: give --shard (this process is one shard) or --devices (one shard per device), "
                     "not both")
    try:
        shard = parse_shard(args.shard) if args.shard else (0, 1)
    except (ValueError, DrvtmaError) as exc:
        parser.error(f"--shard {args.shard}: {exc}")
    if args.target == "list":
        for name in target_names():
            try:
                print(f"{name:<12} {get_target(name).description}")
            except ImportError as exc:  # a registered room that is not importable here
                print(f"{name:<12} (unavailable: {exc})")
        return 0
    try:
        target = get_target(args.target) if args.kernel is None else _kernel_target(args, parser)
    except KeyError as exc:
        parser.error(f"target: {exc.args[0]}")
    if args.fake_device and not getattr(target, "fake_device", True):
        parser.error(f"--fake-device: the {target.name} target has none (it needs a Hopper GPU); run it without "
                     "--fake-device")
    if args.out is None:
        try:
            args.out = out_dir(DEFAULT_OUT)
        except argparse.ArgumentTypeError as exc:
            parser.error(f"--out: {exc}")
    spec = _load_spec(args.spec, parser)
    if shard[1] > 1 and args.seed is None:
        parser.error("--seed: give it with --shard (every shard must draw from the one campaign the seed defines)")
    seed = args.seed if args.seed is not None else secrets.randbelow(1 << 31)
    if args.signatures and (args.kernel is None or args.strategy != "triton"):
        parser.error("--signatures: pools Triton's compiles; give it with --kernel and --strategy triton")
    try:
        boxes = {} if args.max_boxes is None else {"max_boxes": args.max_boxes}
        if boxes and args.target != "loads":
            parser.error("--max-boxes: loads only (a store or reduction case is one box)")
        options = (cast(Any, target).configure(spec, **boxes) if args.kernel is None else  # kernel-*: below
                   cast(Any, target).configure(spec, kernel=args.kernel, strategy=args.strategy,
                                               signatures=args.signatures, signature_seed=seed, **boxes))
    except DrvtmaError:  # a rule the spec breaks: exit 1, the rule named
        raise
    except ValueError as exc:  # a spec this target cannot take
        parser.error(f"--spec: {exc}")
    db_path = None if args.no_db else (args.db or str(local_db_path()))
    if args.oracle_workers and not target.oracle_workers:
        parser.error(f"--oracle-workers: loads, im2col, stores, reductions and your kernel's only (the "
                     f"{target.name} target's oracle runs in its own process)")
    campaign = dict(seed=seed, examples=args.examples, seconds=args.seconds, fake=args.fake_device,
                    shrink=not args.no_shrink, max_shrinks=args.max_shrinks, shrink_seconds=args.shrink_seconds,
                    oracle_workers=args.oracle_workers)
    devices = parse_devices(args.devices)
    if devices and args.profile:
        parser.error("--profile: one process's campaign only (without --devices)")
    if devices:
        result = run_sharded(target.name, options, devices, database_path=db_path, **campaign)
    else:
        database = open_database(db_path) if db_path else None
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        try:
            result = run_campaign(target, options, database=database, progress=not args.quiet, shard=shard,
                                  **campaign)
        finally:
            if profiler is not None:
                profiler.disable()
        if profiler is not None:
            _write_profile(target, profiler, Path(args.profile))
    return _finish(target, result, Path(args.out), args.require_coverage, args.oracle_workers)


def _write_profile(target, profiler: cProfile.Profile, path: Path) -> None:
    """The campaign's profile to `path` (pstats: `python -m pstats`, snakeviz), its top functions on stdout and
    as a figure line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(str(path))
    rows = report.profile_rows(pstats.Stats(profiler))
    print(f"the campaign's process, the functions that took the most of their own time (profile: {path}):")
    print(table_text(["function", "calls", "own s", "total s"], [list(r.values()) for r in rows], "simple",
                     numparse=True))
    record_figure({"test": "fuzz_profile", "target": target.name, "top": rows})


def _finish(target, result, out: Path, require_coverage: int = 0, oracle_workers: int = 0) -> int:
    """Reproducers, the reports, the summary on stdout and the figure line; exit 1 when anything failed."""
    reproducers = report.write_reproducers(target, result, out)
    js, md = report.write_reports(result, out, reproducers)
    print(report.summary_table(result))
    print()
    print(report.headline(result))
    print(f"what bounds the rate: {bound_by(result.timing)}")
    if result.coverage is not None:
        print(result.coverage.summary())
    print(f"reports: {md}, {js}")
    for path in reproducers:
        print(f"reproducer: {path}  (drvtma repro {path})")
        if Path(path).with_suffix(".svg").exists():
            print(f"picture: {Path(path).with_suffix('.svg')}")
    record_figure({"test": "fuzz_campaign", "target": target.name, "cases": result.cases, "size": result.size,
                   "unit": target.unit, "seconds": round(result.seconds, 3),
                   "per_second": round(result.per_second, 1), "size_per_second": round(result.size_per_second, 1),
                   "mismatches": result.mismatches, "seed": result.seed, "shards": result.shards,
                   "bound_by": bound_by(result.timing), "timing": result.timing, "oracle_workers": oracle_workers})
    short: list[str] = []
    if result.coverage is not None:
        record_figure(result.coverage.figure())
        short = result.coverage.unhit(require_coverage) if require_coverage else []
        if short:
            print(f"coverage below {require_coverage} hits in {len(short)} class(es): {', '.join(short[:10])}"
                  + (" ..." if len(short) > 10 else ""))
    elif require_coverage:
        print(f"--require-coverage: the {target.name} target measures no coverage")
        short = [target.name]
    return 1 if result.mismatches or result.known_failures or short else 0


def merge_command(argv: list[str]) -> int:
    from ..fuzz.merge import MergeError, merge_reports

    p = Parser(prog="drvtma fuzz merge", description="Merge the JSON reports of a campaign's shards (`drvtma fuzz "
               "TARGET --shard K/N`) into one report, Markdown and JSON: cases, mismatches by dtype, rank, swizzle "
               "and fill, rates per shard and in all, every failure with its shard and a reproducer. Refuses "
               "reports of different targets, options, seeds, budgets or drvtma versions (exit 2). Exit 1 when "
               "a shard found a mismatch.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="folders holding shard reports (*-report.json), or files")
    p.add_argument("--out", type=out_dir, help="folder for the merged report and reproducers (default: the first "
                   "DIR/merged)")
    args = p.parse_args(argv)
    try:
        result = merge_reports(args.dirs)
    except MergeError as exc:
        p.error(str(exc))
    out = Path(args.out) if args.out else (Path(args.dirs[0]) if Path(args.dirs[0]).is_dir()
                                           else Path(args.dirs[0]).parent) / "merged"
    return _finish(get_target(result.target), result, out)


# what every reproducer holds (report.reproducer writes them)
REPRODUCER_KEYS = ("target", "options", "case", "describe", "campaign", "result")


def _read_reproducer(path, parser: Parser) -> dict:
    """The reproducer in `path`, its target and case loaded once (so a broken file fails here, not mid-replay)."""
    what = f"a reproducer written by `drvtma fuzz` (format {report.REPRODUCER_FORMAT})"
    try:
        recorded = json_object(path, what)
    except argparse.ArgumentTypeError as exc:
        parser.error(f"file: {exc}")
    missing = [k for k in REPRODUCER_KEYS if k not in recorded]
    if not (isinstance(recorded.get("campaign"), dict) and isinstance(recorded.get("result"), dict)
            and isinstance(recorded["result"].get("first_differences"), list)):
        missing.append("campaign/result objects")
    if recorded.get("drvtma_reproducer") != report.REPRODUCER_FORMAT or missing:
        parser.error(f"file: {str(path)!r} is not {what}" + (f" (it lacks {', '.join(missing)})" if missing else ""))
    try:
        target = get_target(recorded["target"])
    except (KeyError, TypeError) as exc:
        parser.error(f"file: {str(path)!r} names an unknown fuzz target ({exc})")
    try:
        target.case_from_json(recorded["case"], recorded["options"])
    except (DrvtmaError, KeyError, TypeError, ValueError, AttributeError) as exc:
        parser.error(f"file: {str(path)!r}: its case does not load into target {target.name} ({exc!r})")
    return recorded


def repro_command(argv: list[str]) -> int:
    p = Parser(prog="drvtma repro", description="Replay a reproducer written by `drvtma fuzz` "
               "and print the diff. Exit 1 while the case still fails, 0 once it passes.")
    p.add_argument("file", type=in_file, help="a reproducer JSON written by `drvtma fuzz`")
    p.add_argument("--fake-device", action="store_true", help="the oracle stands in for the GPU")
    args = p.parse_args(argv)
    recorded = _read_reproducer(args.file, p)
    if args.fake_device and not getattr(get_target(recorded["target"]), "fake_device", True):
        p.error(f"--fake-device: the {recorded['target']} target has none (it needs a Hopper GPU); run it without "
                "--fake-device")
    print(f"drvtma repro: target {recorded['target']}, "
          f"{'shrunk' if recorded.get('shrunk') else 'as found'} case from seed {recorded['campaign'].get('seed')}")
    print(recorded["describe"])
    outcome = report.replay(recorded, fake=args.fake_device)
    print()
    print(report.diff_text(outcome))
    if outcome.ok:
        print("\nthe case passes now (recorded: it failed)")
        return 0
    try:
        target = get_target(recorded["target"])
        svg = report.write_picture(target, target.case_from_json(recorded["case"], recorded["options"]), outcome,
                                   args.file)
        if svg:
            print(f"picture: {svg}")
    except OSError as exc:  # a reproducer in a folder we cannot write: the diff above still stands
        print(f"no picture written: {exc}")
    same = report.same_diff(recorded["result"], outcome)
    print("\nsame diff as recorded" if same else "\nthe diff differs from the recorded one", file=sys.stdout)
    return 1
