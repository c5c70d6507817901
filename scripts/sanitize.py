#!/usr/bin/env python3
"""compute-sanitizer's four tools over the kernel families, small configurations (gpu-check's `sanitizer` step).

Each (tool, family) pair runs the family's command under the tool and records one figure line
`{"test": "sanitizer", "tool": ..., "family": ..., "kernels": [...], "errors": N, "api_errors": N, ...}` parsed
from the sanitizer's own summary; `kernels` are the kernels the family loaded (drvtma logs them to
$DRVTMA_KERNEL_LOG). Exits non-zero when any pair has an error, an API error, a hazard, or a failing command.
Expected faults (the fault-child tests) stay outside: a family runs only correct programs.

To add a family, add one line to FAMILIES: name -> the arguments of a Python command (run with this Python).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from drvtma.runtime.figures import record_figure  # noqa: E402  (after the source root is on the path)

FAMILY_SCRIPT = str(ROOT / "scripts" / "sanitize_family.py")

# name -> Python arguments. One line per family. tests/test_sanitize_cpu.py checks that every kernel in cu/ ran
# in the sanitizer step of the last recorded gpu-check (docs/results/gpu-check.md).
FAMILIES: dict[str, list[str]] = {
    "b08_modes": [FAMILY_SCRIPT, "b08_modes"],          # sync, bulk1d, tensor2d, pipe2
    "rings_thread": [FAMILY_SCRIPT, "rings_thread"],    # pipeN, ws: thread split
    "rings_warp": [FAMILY_SCRIPT, "rings_warp"],        # pipeN, ws: warp-owned tiles
    "load_probe": [FAMILY_SCRIPT, "load_probe"],
    "im2col_probe": [FAMILY_SCRIPT, "im2col_probe"],  # im2col loads, ranks 3-5
    "store_probe": [FAMILY_SCRIPT, "store_probe"],      # tensor stores, reductions, bulk stores
    "core": [FAMILY_SCRIPT, "core"],
    "release_repro": [FAMILY_SCRIPT, "release_repro"],  # the one-stage ring that shows racecheck's view of a release
    "wgmma": [str(ROOT / "scripts" / "sanitize_wgmma.py")],              # every wgmma probe module
    "global_maps": [str(ROOT / "scripts" / "sanitize_global_maps.py")],  # maps in global memory, device edits
    "cluster": [str(ROOT / "scripts" / "sanitize_cluster.py")],          # multicast (2..16 CTAs), DSMEM
    "bench_kernels": [FAMILY_SCRIPT, "bench_kernels"],  # roof read, a TMA ring, multicast bench, launch cost
    "store_roundtrip": [str(ROOT / "scripts" / "bench_store.py"), "--mib", "4", "--repeats", "1", "--stages", "2"],
    "gemm": [str(ROOT / "scripts" / "sanitize_gemm.py")],                # the GEMM: bf16, fp8, ragged, variants
    "bank_probe": [FAMILY_SCRIPT, "bank_probe"],        # the ld.shared bank-conflict timing kernel
}

TOOLS: dict[str, list[str]] = {
    # API errors too: a driver call that fails in normal operation is a bug, even when drvtma handles it
    "memcheck": ["--tool", "memcheck", "--report-api-errors", "all", "--check-api-memory-access", "yes"],
    "racecheck": ["--tool", "racecheck", "--report-api-errors", "all"],
    "synccheck": ["--tool", "synccheck", "--report-api-errors", "all"],
    "initcheck": ["--tool", "initcheck", "--report-api-errors", "all"],
}

_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error")
_RACECHECK_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_API_ERROR = re.compile(r"Program hit (\S+) .* on CUDA API call to (\w+)")


def find_sanitizer() -> str | None:
    for candidate in (os.environ.get("COMPUTE_SANITIZER"), shutil.which("compute-sanitizer"),
                      "/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    for found in sorted(Path("/usr/local").glob("cuda*/bin/compute-sanitizer")):
        return str(found)
    return None


def parse_summary(text: str) -> dict:
    """The sanitizer's counts: errors (ERROR SUMMARY), api_errors (each 'Program hit ... on CUDA API call'),
    racecheck's hazards and warnings, and which calls failed. `summary` is False if no summary line was printed."""
    errors = [int(m) for m in _ERROR_SUMMARY.findall(text)]
    races = _RACECHECK_SUMMARY.findall(text)
    api = _API_ERROR.findall(text)
    out = {"errors": sum(errors), "api_errors": len(api), "summary": bool(errors or races)}
    if races:
        out["hazards"] = sum(int(h) for h, _, _ in races)
        out["warnings"] = sum(int(w) for _, _, w in races)
        if not errors:
            out["errors"] = sum(int(e) for _, e, _ in races)
    if api:
        out["failed_calls"] = sorted({f"{call}: {code}" for code, call in api})
    return out


def run_pair(sanitizer: str, tool: str, family: str, timeout: float, log_dir: Path | None) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".kernels") as klog:
        # the family's own figures (speeds under the sanitizer's instrumentation) stay out of the report
        env = {k: v for k, v in os.environ.items() if k != "DRVTMA_REPORT_JSONL"}
        env.update({"DRVTMA_KERNEL_LOG": klog.name, "PYTHONUNBUFFERED": "1"})
        cmd = [sanitizer, *TOOLS[tool], sys.executable, *FAMILIES[family]]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            rc, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc = "timeout"
            text = "\n".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                             for x in (exc.stdout, exc.stderr))
        kernels = sorted(set(Path(klog.name).read_text().split()))
    figure = {"test": "sanitizer", "tool": tool, "family": family, "kernels": kernels, **parse_summary(text),
              "exit": rc, "seconds": round(time.perf_counter() - t0, 1)}
    figure["clean"] = (rc == 0 and figure["summary"] and figure["errors"] == 0 and figure["api_errors"] == 0
                       and figure.get("hazards", 0) == 0)
    if log_dir is not None and not figure["clean"]:
        (log_dir / f"{tool}-{family}.log").write_text(text)
    if not figure["clean"]:
        figure["tail"] = text.strip().splitlines()[-25:]
    return figure


def record(figure: dict) -> None:
    record_figure({k: v for k, v in figure.items() if k != "tail"}, echo=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--jobs", type=int, default=4, help="sanitizer runs at a time (default 4)")
    ap.add_argument("--timeout", type=float, default=100, help="seconds per run")
    ap.add_argument("--logs", default="", help="keep the full output of every run that is not clean in this folder")
    args = ap.parse_args()
    tools, families = args.tools.split(","), args.families.split(",")
    for name, known in (("tool", TOOLS), ("family", FAMILIES)):
        bad = [x for x in (tools if name == "tool" else families) if x not in known]
        if bad:
            print(f"unknown {name}(s) {bad}; known: {', '.join(known)}", file=sys.stderr)
            return 2
    sanitizer = find_sanitizer()
    if sanitizer is None:
        print("compute-sanitizer not found (PATH, /usr/local/cuda*/bin, $COMPUTE_SANITIZER)", file=sys.stderr)
        return 1
    log_dir = Path(args.logs) if args.logs else None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    pairs = [(tool, family) for tool in tools for family in families]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        # Every family's kernels compiled once, without a sanitizer (families at a time: NVRTC is CPU-bound), so
        # the sanitizer runs find them cached.
        list(pool.map(lambda family: subprocess.run([sys.executable, *FAMILIES[family]], cwd=ROOT,
                                                    capture_output=True, timeout=args.timeout), families))
        figures = list(pool.map(lambda p: run_pair(sanitizer, *p, args.timeout, log_dir), pairs))
    for figure in figures:
        record(figure)
        mark = "clean" if figure["clean"] else "NOT CLEAN"
        print(f"{figure['tool']:9} {figure['family']:13} {mark}: errors {figure['errors']}, api errors "
              f"{figure['api_errors']}, hazards {figure.get('hazards', '-')}, {figure['seconds']} s, "
              f"kernels {', '.join(figure['kernels']) or 'none'}")
        for line in figure.get("tail", []):
            print("    " + line)
    dirty = [f for f in figures if not f["clean"]]
    print(json.dumps({"test": "sanitizer_total", "runs": len(figures), "not_clean": len(dirty),
                      "tools": tools, "families": families}))
    return 1 if dirty else 0


if __name__ == "__main__":
    raise SystemExit(main())
