"""`drvtma audit [--report DIR] [--pictures] [--fail-on RULES] -- python script.py ARGS`: run a Python program
unchanged under CUPTI, then report every tensor map it encoded or launched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .parser import Parser, existing_file, list_of, out_dir, usage_error

NO_AUDIT = 3  # the audit could not start here (the "no usable GPU or tool" status)


def _parser() -> Parser:
    p = Parser(prog="drvtma audit", description=__doc__.split("\n\n")[0],
               epilog="example:\n  drvtma audit --report audit --pictures -- python train.py --steps 10\n\n"
                      "exit status: 1 when a --fail-on rule is broken, 3 when the audit cannot start here, "
                      "else the program's own")
    p.add_argument("--report", default="drvtma-audit", type=out_dir, help="folder for audit.json, audit.md (and the SVGs)")
    p.add_argument("--pictures", action="store_true", help="draw each tiled map's box in shared memory (SVG)")
    p.add_argument("--fail-on", type=list_of(str, "rule names"), default=[],
                   help="comma-separated rule names (or 'any'): exit 1 when a map breaks one")
    p.add_argument("--follow-pointers", action="store_true",
                   help="also read maps in global memory behind the arguments that point to device memory (each "
                        "new launch waits to finish: slower; for libraries that pass maps by pointer)")
    p.add_argument("--replay", type=existing_file, metavar="EVENTS",
                   help="judge a saved stream (a report's events.jsonl) again instead of running a program")
    return p


def known_rules() -> set[str]:
    from ..tma.im2col.rules import IM2COL_ALL_RULES
    from ..tma.tiled.spec import ALL_RULES

    return set(ALL_RULES) | set(IM2COL_ALL_RULES)


def child_command(program: list[str], events: str, follow: bool = False) -> list[str] | None:
    """The command that runs `program` under the audit: a Python interpreter (or a script.py) gets the runner
    inserted; anything else is None (a native binary cannot be watched from Python)."""
    first = Path(program[0]).name
    runner = ["-m", "drvtma.audit.run", events, *(["--follow-pointers"] if follow else []), "--"]
    if first.startswith("python"):
        return [program[0], *runner, *program[1:]]
    if first.endswith(".py"):
        return [sys.executable, *runner, *program]
    return None


def _run_child(prog: str, program: list[str], report: Path, follow: bool = False):
    """(stream, the program's exit status), or an exit status when it could not start. The stream is kept as
    REPORT/events.jsonl (`--replay` judges it again)."""
    from ..audit import load_events

    report.mkdir(parents=True, exist_ok=True)
    events = report / "events.jsonl"
    if events.exists():
        events.unlink()  # a stream of an earlier run must not pass for this one's
    cmd = child_command(program, str(events), follow)
    if cmd is None:
        return usage_error(prog, f"{program[0]!r} is not a Python program; drvtma audit runs "
                                 "`python script.py ...` or `python -m module ...`"), None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                      env.get("PYTHONPATH")]))
    try:
        status = subprocess.call(cmd, env=env)
    except OSError as exc:
        return usage_error(prog, f"cannot start {program[0]!r}: {exc.strerror}"), None
    return (load_events(events) if events.exists() else None), status


def audit_command(argv: list[str]) -> int:
    from ..audit import judge, load_events, write_report
    from ..audit.report import library_rows
    from ..audit.run import REFUSED

    prog = "drvtma audit"
    own, program = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = _parser().parse_args(own)
    unknown = sorted(set(args.fail_on) - known_rules() - {"any"})
    if unknown:
        return usage_error(prog, f"--fail-on: unknown rule(s) {', '.join(unknown)}; name drvtma rules "
                                 "(drvtma check --help lists them) or 'any'")
    if args.replay:
        if program or args.follow_pointers:
            return usage_error(prog, "--replay judges a saved stream: give no program after -- and no "
                                     "--follow-pointers (a stream holds what its run read)")
        stream, status, program = load_events(args.replay), 0, [f"replay of {args.replay}"]
    elif not program or (Path(program[0]).name.startswith("python") and len(program) < 2):
        return usage_error(prog, "name the program after --: drvtma audit -- python script.py ARGS")
    else:
        stream, status = _run_child(prog, program, Path(args.report), args.follow_pointers)
        if isinstance(stream, int):
            return stream
    if stream is None or stream.refused:
        why = stream.refused if stream else f"the program exited ({status}) before the audit started"
        print(f"{prog}: {why}", file=sys.stderr)
        return NO_AUDIT if status == REFUSED or stream is None else status
    j = judge(stream.events)
    paths = write_report(args.report, j, stream.counts, " ".join(program), pictures=args.pictures)
    for r in library_rows(j, stream.counts):
        behind = f" ({r['maps_behind_pointers']} behind pointers)" if args.follow_pointers else ""
        print(f"{r['library']}: {r['encodes']} encode(s), {r['launch_maps']} map(s) in launches{behind}, "
              f"{r['decoded']} decoded, {r['rules_broken']} breaking a rule, {r['launches']} launch(es)"
              + (f", {r['unreadable']} unreadable" if r["unreadable"] else ""))
    if not stream.complete:
        print(f"{prog}: the program ended before the audit's last line (exit status {status}); the report holds "
              "what was seen until then", file=sys.stderr)
    print(f"report: {paths[1]}")
    rules = None if "any" in args.fail_on else set(args.fail_on)
    failing = j.broken(rules) if args.fail_on else []
    if failing:
        names = sorted({r for m in failing for r in m.rules if rules is None or r in rules})
        print(f"{prog}: {len(failing)} map(s) break {', '.join(names)}", file=sys.stderr)
        return 1
    return status
