#!/usr/bin/env python3
"""The GPU tests with the portable build (gpu-check's `portable_build` step): DRVTMA_ARCH=compute_90 hands every
kernel to the driver as compute_90 PTX, so on a Hopper what runs is the driver's JIT output, not an sm_90a cubin.

Runs tests/test_*_gpu.py but the timing ones on a few pytest-xdist workers, with short fuzz budgets; the tests
that need an arch-specific feature (wgmma and the GEMM, tensormap.replace) skip by their `needs` marker, naming
the rule. Records `{"test": "portable_build", "target": "compute_90", "passed": N, "failed": F, "skipped": S}` and
exits non-zero when any test failed or errored.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from drvtma.runtime.figures import record_figure  # noqa: E402  (after the source root is on the path)

TARGET = "compute_90"
# and the Triton tests, deselected by name; the audit's tests watch other libraries' programs (torch, JAX), whose
# kernels no build target of drvtma's changes (and the one drvtma program, the GEMM, needs sm_90a)
OTHER_TOOLCHAINS = ("test_byo_toolchains_gpu.py", "test_audit_gpu.py")
SHORT_FUZZ = {"DRVTMA_FUZZ_SPECS": "200", "DRVTMA_FUZZ_BOXES": "1000", "DRVTMA_FUZZ_STORES": "500",
              "DRVTMA_FUZZ_WGMMA": "100", "DRVTMA_FUZZ_MULTICAST": "1000", "DRVTMA_FUZZ_SECONDS": "1"}


def outcome_counts(junit: Path) -> dict:
    """passed / failed (failures and errors) / skipped of one junit file; unreadable: one failure."""
    try:
        cases = list(ET.parse(junit).getroot().iter("testcase"))
    except (OSError, ET.ParseError):
        return {"passed": 0, "failed": 1, "skipped": 0}
    tags = [{child.tag for child in case} for case in cases]
    failed = sum(bool(t & {"failure", "error"}) for t in tags)
    skipped = sum("skipped" in t and not t & {"failure", "error"} for t in tags)
    return {"passed": len(cases) - failed - skipped, "failed": failed, "skipped": skipped}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4, help="pytest-xdist workers (0 or 1: serial)")
    args = ap.parse_args()
    # kernels other toolchains build (nvcc, cuda.core, Triton) do not follow DRVTMA_ARCH: their tests, among the
    # longest, would only run again unchanged
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*_gpu.py")
                   if p.name not in OTHER_TOOLCHAINS)
    spread = ["-n", str(args.workers)] if args.workers > 1 and importlib.util.find_spec("xdist") else []
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "portable.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *spread, "-m", "not timing",
               "-k", "not triton", "--junitxml", str(junit), *files]
        env = {**os.environ, **SHORT_FUZZ, "DRVTMA_ARCH": TARGET}
        proc = subprocess.run(cmd, cwd=ROOT, env=env)
        counts = outcome_counts(junit)
    record_figure({"test": "portable_build", "target": TARGET, **counts, "pytest_exit": proc.returncode})
    return 0 if counts["failed"] == 0 and proc.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
