"""Campaign reports (summary table, Markdown, JSON) and reproducer files (write, read, replay, diff)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..compat import drvtma_version
from ..runtime.figures import table_text
from .campaign import LABEL_ORDER, CampaignResult, Failure, bound_by
from .targets import Outcome, get_target

REPRODUCER_FORMAT = 1


def summary_rows(result: CampaignResult) -> list[list]:
    """[label, value, cases, size, mismatches] by dtype, rank, swizzle, fill (then any other label), sorted."""
    def order(key):
        name, _, value = key.partition("=")
        rank = LABEL_ORDER.index(name) if name in LABEL_ORDER else len(LABEL_ORDER)
        digits = re.match(r"\d+", value)  # 1, 2, .. and 32B, 64B, 128B in numeric order
        return rank, name, (0, int(digits.group()), value) if digits else (1, 0, value)

    return [[key.partition("=")[0], key.partition("=")[2], *result.by_label[key]]
            for key in sorted(result.by_label, key=order)]


def summary_table(result: CampaignResult, fmt: str = "simple") -> str:
    unit = _unit(result)
    rows = summary_rows(result)
    rows.append(["all", "", result.cases, result.size, result.mismatches])
    return table_text(["by", "value", "cases", unit, "mismatches"], rows, fmt)


def _unit(result: CampaignResult) -> str:
    try:
        return get_target(result.target).unit
    except KeyError:
        return "size"


def headline(result: CampaignResult) -> str:
    return (f"drvtma fuzz {result.target}: {result.cases:,} cases, {result.size:,} {_unit(result)} in "
            f"{result.seconds:.1f} s ({result.size_per_second:,.0f} {_unit(result)}/s, {result.per_second:,.0f} "
            f"cases/s), {result.mismatches} mismatch{'es' if result.mismatches != 1 else ''}, seed {result.seed}"
            + (f", {result.shards} shards" if result.shards > 1 else ""))


def failure_json(target, failure: Failure, reproducer_path: str | None) -> dict:
    """One failure as a report holds it: enough to rebuild it in a merge (cases, choices, outcomes) and its shard."""
    shrunk = failure.shrunk_case is not None
    return {"case_index": failure.index, "shard": failure.shard,
            "detail": failure.outcome.detail.splitlines()[0] if failure.outcome.detail else "",
            "shrink": failure.shrink, "reproducer": reproducer_path, "trace": failure.trace,
            "case": target.case_to_json(failure.case), "outcome": outcome_json(failure.outcome),
            "shrunk_case": target.case_to_json(failure.shrunk_case) if shrunk else None,
            "shrunk_outcome": outcome_json(failure.shrunk_outcome) if failure.shrunk_outcome else None}


def to_json(result: CampaignResult, reproducers: list[str] | None = None) -> dict:
    target = get_target(result.target)
    paths: list[str | None] = list(reproducers or [])
    paths += [None] * (len(result.failures) - len(paths))
    return {"drvtma_version": drvtma_version(), "shard": None if result.shard is None else [result.shard, result.shards],
            "budget": result.budget, "batches": result.batches, "per_shard": result.per_shard,
            "target": result.target, "seed": result.seed, "options": result.options, "cases": result.cases,
            "size": result.size, "unit": _unit(result), "mismatches": result.mismatches,
            "known_failures": result.known_failures, "seconds": round(result.seconds, 3),
            "per_second": round(result.per_second, 1), "size_per_second": round(result.size_per_second, 1),
            "timing": result.timing, "bound_by": bound_by(result.timing), "shards": result.shards,
            "devices": result.devices,
            "by": [dict(zip(("label", "value", "cases", "size", "mismatches"), row)) for row in summary_rows(result)],
            "failures": [failure_json(target, f, path) for f, path in zip(result.failures, paths)],
            "coverage": None if result.coverage is None else {**result.coverage.figure(),
                                                               "counts": dict(result.coverage.counts)},
            "reproducers": reproducers or []}


def to_markdown(result: CampaignResult, reproducers: list[str] | None = None) -> str:
    lines = [f"# drvtma fuzz {result.target}", "", headline(result), "",
             f"- what bounds the rate: {bound_by(result.timing)}",
             "- time in each part (s): " + ", ".join(f"{k} {v}" for k, v in result.timing.items()),
             f"- options: `{json.dumps(result.options, sort_keys=True)}`", ""]
    if result.known_failures:
        lines += [f"- {result.known_failures} failure(s) from the example database still fail", ""]
    lines += ["## Summary", "", summary_table(result, "github"), ""]
    if result.coverage is not None:
        lines += ["## Coverage", "", result.coverage.summary(), "", table_text(
            ["class family", "classes", "hit", "fewest hits"], result.coverage.rows(), "github"), ""]
    if reproducers:
        lines += ["## Reproducers (replay with `drvtma repro FILE`)", ""]
        lines += [f"- `{path}`" for path in reproducers]
        lines.append("")
    if result.per_shard:
        lines += ["## Shards", "", table_text(["shard", "cases", _unit(result), "mismatches", "seconds", "cases/s",
                                               "devices"], [[r["shard"], r["cases"], r["size"], r["mismatches"],
                                                             r["seconds"], r["per_second"], ",".join(r["devices"])]
                                                            for r in result.per_shard], "github"), ""]
    if result.failures:
        paths = list(reproducers or []) + [""] * len(result.failures)
        lines += ["## Failures", "", table_text(["case", "shard", "reproducer", "first line"], [
            [f.index if f.index is not None else "database", f.shard, paths[i],
             f.outcome.detail.splitlines()[0] if f.outcome.detail else ""] for i, f in enumerate(result.failures)],
            "github"), ""]
    for f in result.failures[:10]:
        outcome = f.shrunk_outcome or f.outcome
        lines += [f"### case {f.index if f.index is not None else '(from the database)'}", "", "```",
                  outcome.detail, "```", ""]
    return "\n".join(lines)


def report_stem(result: CampaignResult) -> str:
    """`loads-report`, or `loads-shard2of4-report` for one shard (shards may share a folder on a shared disk)."""
    if result.shard is None or result.shards == 1:
        return f"{result.target}-report"
    return f"{result.target}-shard{result.shard}of{result.shards}-report"


def write_reports(result: CampaignResult, out: Path, reproducers: list[str]) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / f"{report_stem(result)}.json", out / f"{report_stem(result)}.md"
    js.write_text(json.dumps(to_json(result, reproducers), indent=2, sort_keys=True, default=str) + "\n")
    md.write_text(to_markdown(result, reproducers) + "\n")
    return js, md


# ---------------------------------------------------------------------------------------------- reproducers

def outcome_json(outcome: Outcome) -> dict:
    return {"ok": outcome.ok, "expected": outcome.expected, "got": outcome.got,
            "first_differences": outcome.differences, "detail": outcome.detail}


def reproducer(target, result: CampaignResult, failure: Failure) -> dict:
    case = failure.shrunk_case if failure.shrunk_case is not None else failure.case
    outcome = failure.shrunk_outcome or failure.outcome
    return {"drvtma_reproducer": REPRODUCER_FORMAT, "target": target.name, "options": result.options,
            "case": target.case_to_json(case), "describe": target.describe(case),
            "campaign": {"seed": result.seed, "case_index": failure.index},
            "shrunk": failure.shrunk_case is not None and failure.shrunk_case is not failure.case,
            "shrink": failure.shrink, "original_case": target.case_to_json(failure.case),
            "result": outcome_json(outcome)}


def write_picture(target, case, outcome: Outcome, json_path) -> str | None:
    """The failure's SVG beside its reproducer (same name, .svg); None when the target draws none."""
    svg = target.picture(case, outcome)
    if svg is None:
        return None
    path = Path(json_path).with_suffix(".svg")
    path.write_text(svg)
    return str(path)


def write_reproducers(target, result: CampaignResult, out: Path) -> list[str]:
    """One JSON per failure; beside the first, its picture (named in the JSON's "picture")."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, failure in enumerate(result.failures):
        tag = f"case{failure.index}" if failure.index is not None else f"db{n}-shard{failure.shard}"
        path = out / f"repro-{target.name}-seed{result.seed}-{re.sub(r'[^A-Za-z0-9_-]', '', tag)}.json"
        d = reproducer(target, result, failure)
        if n == 0:
            case = failure.shrunk_case if failure.shrunk_case is not None else failure.case
            svg = write_picture(target, case, failure.shrunk_outcome or failure.outcome, path)
            if svg:
                d["picture"] = Path(svg).name
        path.write_text(json.dumps(d, indent=2, default=str) + "\n")
        paths.append(str(path))
    return paths


def read_reproducer(path) -> dict:
    d = json.loads(Path(path).read_text())
    if d.get("drvtma_reproducer") != REPRODUCER_FORMAT:
        raise ValueError(f"{path} is not a drvtma reproducer (format {REPRODUCER_FORMAT})")
    return d


def replay(d: dict, *, fake: bool = False) -> Outcome:
    """Run a reproducer's case again; the outcome's differences compare with d['result']['first_differences']."""
    target = get_target(d["target"])
    case = target.case_from_json(d["case"], d["options"])
    with target.session(d["options"], fake=fake) as session:
        return session.check([case])[0]


def diff_text(outcome: Outcome) -> str:
    if outcome.ok:
        return "no difference: the device and the oracle agree"
    lines = [outcome.detail, "", "first differences (offset: expected -> got):"]
    lines += [f"  {d['offset']}: {d['expected']} -> {d['got']}  ({d.get('where', '')})" for d in outcome.differences]
    return "\n".join(lines)


def same_diff(recorded: dict, outcome: Outcome) -> bool:
    keys = ("offset", "expected", "got")
    return (not outcome.ok and [tuple(d[k] for k in keys) for d in recorded["first_differences"]]
            == [tuple(d[k] for k in keys) for d in outcome.differences])


def profile_rows(stats, limit: int = 12) -> list[dict]:
    """The functions of a campaign's profile (`pstats.Stats`) that took the most of their own time: where its
    process spends it below the phases `bound_by` names (a driver call shows as the binding's built-in method)."""
    rows = []
    for (path, line, name), (_, calls, own, total, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(path).name}:{line}({name})" if path != "~" else name  # "~": a built-in
        rows.append({"function": where, "calls": calls, "own_s": round(own, 4), "total_s": round(total, 4)})
    return sorted(rows, key=lambda r: -r["own_s"])[:limit]
