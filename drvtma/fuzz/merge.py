"""Shard reports merged into one campaign: `drvtma fuzz merge DIR...` and `--devices` (shards on one host) alike.

Each shard writes a JSON report (`report.to_json`) that holds its counts, its batches and every failure's case,
choices and outcomes. Reports merge only when they are shards of one campaign: the same target, options, seed,
budget and drvtma version, and every shard 0..N-1 exactly once; anything else is refused with the reason named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from ..errors import ArgumentError
from .campaign import CampaignResult, Failure, merge_results
from .coverage import coverage_of
from .targets import Outcome, get_target

SAME = ("target", "seed", "drvtma_version", "options", "budget")  # what one campaign's shards share
READ = ("shard", "failures", "by", "cases", "size", "mismatches", "seconds")  # what else result_from_json reads


class MergeError(ArgumentError):
    """Reports that are not the shards of one campaign (or not shard reports at all): ``[fuzz_merge] DIR = ...``."""

    def __init__(self, value, detail: str, fix: str):
        super().__init__("fuzz_merge", "DIR", str(value), fix, detail)

    def __reduce__(self):
        return type(self), (self.value, self.detail, self.fix)


def report_files(paths) -> list[Path]:
    """The JSON reports in each folder of `paths` (or the file itself), in a stable order."""
    found = []
    for path in map(Path, paths):
        if path.is_dir():
            hits = sorted(path.glob("*-report.json"))
            if not hits:
                raise MergeError(path, "it holds no *-report.json", "give the folders `drvtma fuzz --shard K/N "
                                 "--out DIR` wrote")
            found += hits
        elif path.is_file():
            found.append(path)
        else:
            raise MergeError(path, "it does not exist", "give folders of shard reports")
    return found


def read_report(path: Path) -> dict:
    try:
        d = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MergeError(path, f"not a readable JSON report ({exc})", "give reports `drvtma fuzz` wrote") from None
    missing = [k for k in (*SAME, *READ) if not isinstance(d, dict) or k not in d]
    if missing:
        raise MergeError(path, f"not a shard report of `drvtma fuzz` (it lacks {', '.join(missing)})",
                         "give reports `drvtma fuzz --shard K/N` wrote (this drvtma or newer)")
    shard = d["shard"]
    if shard is not None and not (isinstance(shard, list) and len(shard) == 2
                                  and all(type(v) is int for v in shard) and 0 <= shard[0] < shard[1]):
        raise MergeError(path, f"its shard is {shard!r}, not [K, N] with 0 <= K < N",
                         "give reports `drvtma fuzz --shard K/N` wrote")
    return d


def check_shards(reports: list[tuple[Path, dict]]) -> int:
    """N, when `reports` are exactly the shards 0..N-1 of one campaign; a MergeError naming the difference else."""
    first_path, first = reports[0]
    for path, d in reports:
        for key in SAME:
            if d[key] != first[key]:
                raise MergeError(path, f"the reports differ in {key}: {d[key]!r} here, {first[key]!r} in "
                                 f"{first_path}", f"merge only the shards of one campaign (one {key})")
        if d["shard"] is None:
            raise MergeError(path, "a merged report, not a shard's", "merge the shards' own reports")
    counts = {d["shard"][1] for _, d in reports}
    if len(counts) != 1:
        raise MergeError(first_path, f"the reports differ in their shard count N: {sorted(counts)}",
                         "merge the shards of one --shard K/N campaign (one N)")
    n = counts.pop()
    seen: dict[int, Path] = {}
    for path, d in reports:
        k = d["shard"][0]
        if k in seen:
            raise MergeError(path, f"shard {k}/{n} appears twice (also {seen[k]})", "give each shard's report once")
        seen[k] = path
    missing = sorted(set(range(n)) - set(seen))
    if missing:
        raise MergeError(first_path, f"shard(s) {', '.join(map(str, missing))} of {n} missing",
                         "wait for every shard, or give the folder that holds its report")
    return n


def _outcome(d: dict | None) -> Outcome | None:
    if d is None:
        return None
    return Outcome(d["ok"], d.get("expected"), d.get("got"), d.get("first_differences", []), d.get("detail", ""))


def result_from_json(d: dict) -> CampaignResult:
    """A shard's CampaignResult again, its failures' cases loaded into the target."""
    target = get_target(d["target"])
    k, n = d["shard"]
    result = CampaignResult(d["target"], d["options"], d["seed"], cases=d["cases"], size=d["size"],
                            mismatches=d["mismatches"], seconds=d["seconds"], timing=d.get("timing", {}),
                            batches=list(d.get("batches", [])), shards=n, shard=k, devices=d.get("devices", []),
                            budget=d["budget"])
    result.by_label = {f"{row['label']}={row['value']}": [row["cases"], row["size"], row["mismatches"]]
                       for row in d["by"]}
    result.coverage = coverage_of(target, d["options"])
    if result.coverage is not None and d.get("coverage"):
        result.coverage.counts.update(d["coverage"].get("counts", {}))
    for f in d["failures"]:
        case = target.case_from_json(f["case"], d["options"])
        shrunk = None if f.get("shrunk_case") is None else target.case_from_json(f["shrunk_case"], d["options"])
        outcome = cast(Outcome, _outcome(f["outcome"]))  # a failure's own outcome is never null (failure_json)
        result.failures.append(Failure(f["case_index"], case, f.get("trace", []), outcome, shrunk,
                                       _outcome(f.get("shrunk_outcome")), f.get("shrink", {}), f["shard"]))
    result.known_failures = sum(f.index is None for f in result.failures)
    return result


def merge_reports(paths) -> CampaignResult:
    """One CampaignResult from the shard reports in `paths` (folders or files); MergeError when they do not fit."""
    reports = [(path, read_report(path)) for path in report_files(paths)]
    check_shards(reports)
    target = get_target(reports[0][1]["target"])
    parts = []
    for path, d in reports:
        try:
            parts.append(result_from_json(d))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a row or failure of the wrong form
            raise MergeError(path, f"not a shard report of `drvtma fuzz` ({exc!r})",
                             "give reports `drvtma fuzz --shard K/N` wrote (this drvtma or newer)") from None
    return merge_results(parts, case_key=lambda case: json.dumps(target.case_to_json(case), sort_keys=True,
                                                                 default=str))
