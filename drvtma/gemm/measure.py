"""What a GEMM benchmark measures beside time, for `bench` and `claims` alike: the worst element's error against a
reference in units of the tolerance (`compare`, `atol`, RTOL / ATOL), and nvidia-smi's clocks and power (`read_smi`)."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np

# |drvtma - cuBLAS| <= RTOL |cuBLAS| + ATOL max|cuBLAS|: both accumulate in fp32 and round once to the output,
# so they differ by output roundings (2^-8 relative for bf16, either side) and fp32 summation order.
RTOL = {"bfloat16": 2.0**-7, "float16": 2.0**-10, "float32": 2.0**-18}
ATOL = 2.0**-12
# fp8 inputs: the fp8-mode accumulator keeps fewer bits than fp32 (about 1e-3 of the largest value), so GEMMs that
# sum in different orders differ by that much, growing as sqrt(K) against the largest value: the floor widens as
# sqrt(K / 4096) past K = 4096 (the readings: docs/gemm.md, "fp8's tolerance").
ATOL_FP8 = 2.0**-8
FP8_ATOL_K = 4096
SMI_FIELDS = ("clocks.sm", "clocks.max.sm", "power.draw", "temperature.gpu", "clocks_event_reasons.active")


def read_smi() -> dict:
    """nvidia-smi's SM clock, max clock, power, temperature and active clock-event reasons (empty without it)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {}
    for fields in (SMI_FIELDS, SMI_FIELDS[:-1] + ("clocks_throttle_reasons.active",), SMI_FIELDS[:-1]):
        out = subprocess.run([smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True)
        if out.returncode == 0:
            return dict(zip(("sm_mhz", "max_sm_mhz", "power_w", "temp_c", "reasons"),
                            (v.strip() for v in out.stdout.strip().split(","))))
    return {}


def atol(in_dtype: str, k: int = 0) -> float:
    """The tolerance's floor in units of max|reference| for inputs of `in_dtype` summed over `k` (0: K <= 4096)."""
    if not in_dtype.startswith("float8"):
        return ATOL
    return ATOL_FP8 * math.sqrt(max(1.0, k / FP8_ATOL_K))


def compare(ours: np.ndarray, ref: np.ndarray, out_dtype: str, in_dtype: str = "bfloat16", k: int = 0) -> float:
    """The worst element's error in units of the tolerance (NaN, e.g. unwritten poison, counts as infinite).
    16-bit outputs are compared in fp32 (exact differences of bf16 / fp16 values; the ratio to a tolerance of
    2^-7 or 2^-10 is good to 2^-24), in place: an 8192^2 check took seconds in fp64 with temporaries."""
    work = np.float64 if out_dtype == "float32" else np.float32
    err, bound = ours.astype(work), ref.astype(work)
    np.subtract(err, bound, out=err)
    np.abs(err, out=err)
    np.abs(bound, out=bound)
    floor = atol(in_dtype, k) * max(float(bound.max()), 1e-30)
    np.multiply(bound, RTOL[out_dtype], out=bound)
    bound += floor
    np.divide(err, bound, out=err)
    return float("inf") if not np.isfinite(err).all() else float(err.max())
