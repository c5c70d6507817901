"""`drvtma bench gemm --claims`: the GEMM claims of the async tensor-core article, each one GemmConfig field swept from the default
(CLAIMS), on one shape, every configuration verified against cuBLAS before it is timed.

Operands are made and uploaded once per input type; cuBLAS runs once per type as the reference and is timed once
(same stream, events and L2 flush as bench gemm). Each configuration: compiled, its result on a poisoned C
compared with cuBLAS's within measure.RTOL / ATOL, then timed (median of `runs`). Reported per point: TFLOP/s, the
fraction of the dense peak (989.4 TFLOP/s 16-bit, 1978.9 fp8; H100/H200 SXM spec) and the ratio to cuBLAS;
values the kernel refuses are listed with their rule. Output: a table, gemm-claims.csv and gemm-claims.md with --out.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from ..errors import GemmError
from ..runtime.driver import Resource, close_all
from ..runtime.figures import csv_text, table_text
from ..runtime.figures import record_figure as record
from .config import GemmConfig
from .cublas import CublasUnsupported
from .launch import POISON_U32, Gemm, warm_gemm_cache
from .measure import compare, read_smi
from .reference import random_operands, value_dtype

# The async tensor-core article's claims, each one GemmConfig field swept from the default (bf16 128x256x64, 4 stages,
# 2 consumers, 128B swizzle, setmaxnreg 40/232, persistent, group_m 8). `--claims` verifies and times each value; a value the
# kernel cannot take is refused by its rule, and the table shows which.
CLAIMS: dict[str, tuple[str, tuple, dict]] = {
    # claim: (field, values, other fields the sweep sets with it)
    "swizzle choice changes performance 10-20%": ("swizzle", ("none", "32B", "64B", "128B"), {}),
    "2-4 stages (128x256 tile: 4 fit)": ("stages", (1, 2, 3, 4), {}),
    "2-4 stages (128x128 tile: 6 fit)": ("stages", (1, 2, 3, 4, 5, 6), {"bn": 128}),
    "two consumer warpgroups": ("consumers", (1, 2), {}),  # 1: bm = 64 (128 accumulators a thread either way)
    "setmaxnreg": ("setmaxnreg", (False, True), {}),
    "persistent grid": ("persistent", (False, True), {}),
    "(drvtma's) stream-K last wave": ("streamk", (False, True), {}),
    "tile order keeps L2 warm": ("group_m", (1, 4, 8, 16), {}),
    "wgmma groups in flight": ("inflight", (0, 1), {}),
    "FP8 1.5-2x FP16": ("dtype", ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"), {}),
    "2-CTA multicast": ("cluster_m", (1, 2), {}),
    "traditional mma ~50% of peak": ("mma", ("mma_sync", "wgmma"), {}),
    "(drvtma's) stmatrix epilogue": ("stmatrix", (False, True), {}),
}


def claim_configs(claim: str, base: GemmConfig | None = None) -> list[GemmConfig]:
    """The configurations one claim sweeps (bm follows the consumer count)."""
    field_name, values, extra = CLAIMS[claim]
    base = (base or GemmConfig()).with_(**extra)
    out = []
    for v in values:
        change = {field_name: v}
        if field_name == "consumers":
            change["bm"] = 64 * v
        if field_name == "dtype" and v == "float16":
            change["out_dtype"] = "float16"  # what torch's cuBLAS can write too (no fp16 -> bf16 there)
        out.append(base.with_(**change))
    return out

PEAK_TFLOPS = {1: 1978.9, 2: 989.4}  # dense, by input bytes: H100 / H200 SXM spec (NVIDIA's H100 / H200 SXM datasheets)


@dataclass
class ClaimPoint:
    claim: str
    value: object
    label: str
    tflops: float = float("nan")
    cublas_tflops: float = float("nan")
    peak_fraction: float = float("nan")
    error: float = float("nan")
    note: str = ""

    @property
    def timed(self) -> bool:
        return bool(np.isfinite(self.tflops))


class _Operands(Resource):
    """One input type's A, B, cuBLAS's C (the reference) and a C for the configurations, on the device, with
    cuBLAS's plan: close() releases every one even if another fails (a failure while they are made releases those
    made so far)."""

    launch = None  # cuBLAS's plan (None: cuBLAS cannot, or not planned yet)

    def __init__(self, cublas, dtype: str, out_dtype: str, m: int, n: int, k: int, rng, flush, runs, warmups):
        try:
            self._make(cublas, dtype, out_dtype, m, n, k, rng, flush, runs, warmups)
        except BaseException:
            with contextlib.suppress(Exception):  # the error that stopped it is the one to see
                self.close()
            raise

    def _make(self, cublas, dtype: str, out_dtype: str, m: int, n: int, k: int, rng, flush, runs, warmups):
        from ..runtime.driver import DeviceBuffer
        from ..runtime.timing import time_launches

        self.m, self.n, self.k, self.out = m, n, k, value_dtype(out_dtype)
        a, b = random_operands(rng, dtype, m, n, k)
        self.alpha = 0.5 if dtype.startswith("float8") else 1.0
        self.a, self.b = DeviceBuffer.from_array(a), DeviceBuffer.from_array(b)
        size = m * n * self.out.itemsize
        self.ref, self.c = DeviceBuffer(size), DeviceBuffer(size)
        self.note = ""
        try:
            self.launch = cublas.plan(self.a, self.b, self.ref, m, n, k, dtype, out_dtype, self.alpha)
        except CublasUnsupported:  # cuBLASLt has no e5m2 x e5m2 (CUBLAS_STATUS_NOT_SUPPORTED)
            # the reference is NumPy's fp32 product of the same values instead; cuBLAS's speed is not known
            self.launch, self.cublas_ms = None, float("nan")
            self.note = "cuBLAS cannot (not supported): verified against NumPy fp32"
            prod = np.matmul(a.astype(np.float32), b.astype(np.float32).T) * np.float32(self.alpha)
            self.reference = prod.astype(self.out)
            return
        self.ref.fill_u32(POISON_U32)
        self.launch()
        if hasattr(self.launch, "copy_back"):
            self.launch.copy_back()
        self.reference = self.ref.download(self.out, (m, n))
        self.cublas_ms = time_launches(self.launch, runs=runs, warmups=warmups, flush=flush).median

    def _parts(self) -> tuple:
        return tuple(getattr(self, name, None) for name in ("launch", "a", "b", "ref", "c"))


def run_claims(*, shape=(8192, 8192, 8192), runs: int = 10, warmups: int = 2, flush_l2: bool = True,
               backend: str | None = None, claims=None, seed: int = 15, progress=None, base=None):
    """Every value of every claim (CLAIMS), each a change of one field from `base` (the default config)."""
    from ..runtime.driver import DeviceBuffer, device_properties
    from ..runtime.timing import time_launches
    from .cublas import open_cublas

    props = device_properties()
    warm_gemm_cache([cfg for claim in claims or CLAIMS for cfg in claim_configs(claim, base)])
    cublas = open_cublas(backend)
    flush_buf = DeviceBuffer(2 * props.l2_bytes) if flush_l2 else None
    flush = (lambda: flush_buf.fill_u32(0x5A5A5A5A)) if flush_buf is not None else None
    rng = np.random.default_rng(seed)
    m, n, k = shape
    operands: dict[tuple, _Operands] = {}
    points = []
    smi_before = read_smi()
    try:
        for claim in claims or CLAIMS:
            field_name, values, _ = CLAIMS[claim]
            for value, cfg in zip(values, claim_configs(claim, base)):
                point = ClaimPoint(claim, value, cfg.label())
                points.append(point)
                try:
                    gemm = Gemm(cfg)
                except GemmError as exc:
                    point.note = f"refused: [{exc.rule}]"
                    continue
                key = (cfg.dtype, cfg.out_dtype)
                if key not in operands:
                    operands[key] = _Operands(cublas, cfg.dtype, cfg.out_dtype, m, n, k, rng, flush, runs, warmups)
                ops = operands[key]
                with gemm.bind(ops.a, ops.b, ops.c, m, n, k, alpha=ops.alpha) as bound:
                    bound.run_checked()
                    point.error = compare(ops.c.download(ops.out, (m, n)), ops.reference, cfg.out_dtype, cfg.dtype, k)
                    if point.error > 1.0:
                        point.note = f"MISMATCH vs cuBLAS ({point.error:.3g} x tolerance): not timed"
                    else:
                        ms = time_launches(bound.launch, runs=runs, warmups=warmups, flush=flush).median
                        flops = 2.0 * m * n * k
                        point.tflops = flops / (ms * 1e-3) / 1e12
                        point.cublas_tflops = flops / (ops.cublas_ms * 1e-3) / 1e12
                        point.peak_fraction = point.tflops / PEAK_TFLOPS[cfg.itemsize]
                        point.note = ops.note
                        record({"bench": "gemm_claim", "claim": claim, "value": str(value), "dtype": cfg.dtype,
                                "m": m, "n": n, "k": k, "tflops": round(point.tflops, 1),
                                "cublas_tflops": round(point.cublas_tflops, 1),
                                "peak_fraction": round(point.peak_fraction, 3)})
                if progress is not None:
                    print(_row(point), file=progress, flush=True)
    finally:
        desc = cublas.describe()
        close_all((*operands.values(), flush_buf, cublas))  # every one, even if one fails
    return ClaimsResult(shape, points, desc, smi_before, read_smi(), runs, flush_l2)


def _row(p: ClaimPoint) -> str:
    if not p.timed:
        return f"{p.claim[:44]:<44} {str(p.value):<14} {p.note}"
    return (f"{p.claim[:44]:<44} {str(p.value):<14} {p.tflops:7.1f} {100 * p.peak_fraction:5.1f}% "
            f"{p.tflops / p.cublas_tflops:6.3f} {p.note}")


@dataclass
class ClaimsResult:
    shape: tuple
    points: list
    cublas: str
    smi_before: dict
    smi_after: dict
    runs: int
    flush_l2: bool

    def spreads(self) -> list[str]:
        """One line per claim: each timed value relative to the best one (refused values named with their rule)."""
        lines = []
        for claim in dict.fromkeys(p.claim for p in self.points):
            pts = [p for p in self.points if p.claim == claim]
            timed = [p for p in pts if p.timed]
            if not timed:
                lines.append(f"{claim}: nothing timed")
                continue
            best = max(timed, key=lambda p: p.tflops)
            parts = [f"{p.value} {p.tflops / best.tflops:.3f}" if p.timed else f"{p.value} {p.note}" for p in pts]
            lines.append(f"{claim}: best {best.value} ({best.tflops:.1f} TFLOP/s, {100 * best.peak_fraction:.1f}% "
                         f"of peak); relative to it: " + ", ".join(parts))
        return lines

    def text(self) -> str:
        head = (f"claims at {'x'.join(map(str, self.shape))}; cuBLAS: {self.cublas}\n"
                f"{'claim':<44} {'value':<14} {'TFLOP/s':>7} {'peak':>6} {'vs cuBLAS':>6}")
        return "\n".join([head, *map(_row, self.points)])

    def csv_text(self) -> str:
        return csv_text(("claim", "value", "config", "tflops", "cublas_tflops", "peak_fraction", "error", "note"),
                        [[str(v).replace(",", ";") for v in (p.claim, p.value, p.label, f"{p.tflops:.1f}",
                                                            f"{p.cublas_tflops:.1f}", f"{p.peak_fraction:.3f}",
                                                            f"{p.error:.3g}", p.note)] for p in self.points])

    def markdown(self, command: str) -> str:
        rows = [[p.claim, str(p.value), "", "", "", p.note] if not p.timed else
                [p.claim, str(p.value), f"{p.tflops:.1f}", f"{100 * p.peak_fraction:.1f}",
                 f"{p.tflops / p.cublas_tflops:.3f}", p.note] for p in self.points]
        lines = [table_text(("claim", "value", "TFLOP/s", "% of dense peak", "vs cuBLAS", "note"), rows)]
        lines += ["", "## Per claim: the best value and how far the others fall behind it", "",
                 *(f"- {line}" for line in self.spreads())]
        clocks = (f"SM {self.smi_before.get('sm_mhz', '?')} -> {self.smi_after.get('sm_mhz', '?')} MHz, "
                  f"{self.smi_before.get('power_w', '?')} -> {self.smi_after.get('power_w', '?')} W")
        return "\n".join([
            f"# The async tensor-core article's GEMM claims on the H200 (`{command}`)", "",
            f"- shape {'x'.join(map(str, self.shape))}; every point verified against cuBLAS first; median of "
            f"{self.runs} runs, L2 {'flushed before each' if self.flush_l2 else 'warm'}; {clocks}",
            f"- cuBLAS: {self.cublas}", "- peak: 989.4 TFLOP/s dense 16-bit, 1978.9 fp8 (spec)", "", *lines, ""])
