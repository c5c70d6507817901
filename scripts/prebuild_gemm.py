#!/usr/bin/env python3
"""Compile, in parallel, the GEMM kernels the later GEMM steps of scripts/gpu-check build one at a time (the bench's
for_problem choices and their profile builds, the claim sweep, the configurations tests/test_gemm_gpu.py names),
so those steps find them in NVRTC's disk cache. gpu-check starts it in the background at the beginning; NVRTC
runs on the CPU only. A kernel that does not compile here is compiled (and fails) again in its own step: this
script only reports it. Prints one line: how many kernels, how many were new, the seconds."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from drvtma.gemm.bench import SHAPES  # noqa: E402
from drvtma.gemm.claims import CLAIMS, claim_configs  # noqa: E402
from drvtma.gemm.config import KERNEL_SOURCE, GemmConfig  # noqa: E402

BENCH_DTYPES = ("bfloat16", "float8_e4m3fn")  # gpu-check's bench_gemm and gemm_profile steps


def test_configs() -> list[GemmConfig]:
    """Every GemmConfig in a module-level table of tests/test_gemm_gpu.py (none when it cannot be imported)."""
    sys.path.insert(0, str(ROOT / "tests"))
    spec = importlib.util.spec_from_file_location("gemm_gpu_tests", ROOT / "tests" / "test_gemm_gpu.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - a prebuild is an optimisation: say why and build the rest
        print(f"prebuild: tests/test_gemm_gpu.py not read ({type(exc).__name__}: {exc})", file=sys.stderr)
        return []
    found = []
    for value in vars(module).values():
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
        found += [v for v in items if isinstance(v, GemmConfig)]
    return found


def builds(sm_count: int, l2_bytes: int) -> list[dict]:
    """The define sets to compile, each once."""
    chosen = [GemmConfig(dtype=dt).for_problem(m, n, k, sm_count, l2_bytes) for dt in BENCH_DTYPES
              for m, n, k in SHAPES]
    claims = [cfg for claim in CLAIMS for cfg in claim_configs(claim)]
    out, seen = [], set()
    for defines in ([c.defines() for c in chosen + claims + test_configs() if not list(c.errors())]
                    + [{**c.defines(), "GEMM_PROFILE": 1} for c in chosen]):
        key = tuple(sorted(defines.items()))
        if key not in seen:
            seen.add(key)
            out.append(defines)
    return out


def compile_one(defines: dict) -> tuple[bool, str]:
    from drvtma.runtime.compiler import compile_cubin

    try:
        compile_cubin(KERNEL_SOURCE, defines=defines)
        return True, ""
    except Exception as exc:  # noqa: BLE001 - reported, and the step that needs it fails on its own
        return False, f"{type(exc).__name__}: {str(exc)[:200]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--sm-count", type=int, default=0, help="default: the device's (needs a driver, no context)")
    ap.add_argument("--l2-bytes", type=int, default=0)
    args = ap.parse_args()
    sm_count, l2_bytes = args.sm_count, args.l2_bytes
    if not (sm_count and l2_bytes):
        from drvtma.runtime.driver import device_properties

        props = device_properties()
        sm_count, l2_bytes = sm_count or props.sm_count, l2_bytes or props.l2_bytes
    t0 = time.perf_counter()
    todo = builds(sm_count, l2_bytes)
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        results = list(pool.map(compile_one, todo))
    failed = [why for ok, why in results if not ok]
    print(f"prebuild: {len(todo)} GEMM kernels compiled or found in the cache in {time.perf_counter() - t0:.1f} s "
          f"on {args.workers} workers; {len(failed)} failed" + (f" (first: {failed[0]})" if failed else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
