"""`drvtma bench gemm`: the drvtma GEMM against cuBLAS in one process, on the same operands, the legacy stream and
the same CUDA events (runtime.timing.time_abba: a stream hold before each run, so only GPU time counts).

For each dtype and shape: random normal operands; cuBLAS's result first, then drvtma's on a poisoned C, compared
within a stated tolerance (a configuration that fails is reported, never timed); then both timed in ABBA halves,
the L2 flushed (a 2 x L2 write) before every run unless --no-flush. nvidia-smi's SM clock, power and throttle
reasons are read before and after each shape. Output: a table on stdout, gemm.csv and gemm.md with --out, and one
figure line per point ({"bench": "gemm", ...}) on stdout and in $DRVTMA_REPORT_JSONL.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field

import numpy as np

from ..errors import GemmError
from ..runtime.figures import csv_text, table_text, write_report
from ..runtime.figures import record_figure as record
from ..runtime.timing import percentile, time_abba_pairs, timing_figure
from .claims import CLAIMS, run_claims
from .config import GemmConfig, dtype_name
from .launch import POISON_U32

# What a benchmark measures beside time sits below the benchmarks in `measure`; its names stay importable from here.
from .measure import ATOL, ATOL_FP8, FP8_ATOL_K, RTOL, SMI_FIELDS, atol, compare, read_smi  # noqa: F401
from .profile import PROFILE_DEFINES, profile_gemm
from .reference import random_operands, value_dtype

# Square shapes, LLM-like ones, a skinny M, and 4224 x 4096 x 4096: 528 tiles of 128 x 256 fill 4 waves of 132 SMs exactly where
# 4096^3's 512 leave 16 SMs idle in the last one, so the pair measures what tile quantization costs at 4096^3.
# Skinny M (decode-like: 16, 64, 128 rows) and a short K (8192 x 8192 x 1024: the epilogue weighs most).
SHAPES = ((2048, 2048, 2048), (4096, 4096, 4096), (4224, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096),
          (8192, 4096, 8192), (8192, 8192, 1024), (16, 8192, 8192), (64, 4096, 4096), (128, 8192, 8192))
DTYPES = ("bfloat16",)
PAIRS = 5  # ABBA pairs per point: the point's ratio is the median of their ratios
CSV_COLUMNS = ("dtype", "m", "n", "k", "drvtma_ms", "drvtma_tflops", "cublas_ms", "cublas_tflops", "ratio", "max_error",
               "verified", "sm_mhz_before", "sm_mhz_after", "power_w_before", "power_w_after", "reasons_after",
               "cublas_kernels", "drvtma_runs_ms", "cublas_runs_ms", "pair_ratios", "versus_config", "versus_ms",
               "versus_ratio", "versus_speedup", "versus_pair_speedups", "versus_note")
MARKDOWN_COLUMNS = ("dtype", "M", "N", "K", "drvtma TFLOP/s", "cuBLAS TFLOP/s", "ratio", "pairs", "err/tol", "SM MHz",
                    "W", "cuBLAS kernel", "drvtma config, where not the one above")


@dataclass
class GemmPoint:
    dtype: str
    m: int
    n: int
    k: int
    ms: float = float("nan")
    cublas_ms: float = float("nan")
    max_error: float = float("nan")  # max |drvtma - cuBLAS| / (RTOL |cuBLAS| + ATOL max|cuBLAS|): <= 1 passes
    verified: bool = False
    cublas_algo: str = ""
    cublas_kernels: list = field(default_factory=list)
    smi_before: dict = field(default_factory=dict)
    smi_after: dict = field(default_factory=dict)
    note: str = ""
    config: str = ""  # the label of the configuration that ran (for_problem's choice for the shape, or the given one)
    timings: dict = field(default_factory=dict)  # {"drvtma" | "cublas": runtime.timing.Timing}: every timed run
    pair_ratios: tuple = ()  # cuBLAS's median / drvtma's in each ABBA pair, in the order they ran
    # --versus: the same configuration with some fields changed, verified and timed in the same rounds
    versus_config: str = ""
    versus_ms: float = float("nan")
    versus_pair_ratios: tuple = ()  # cuBLAS's median / the variant's, per round
    versus_pair_speedups: tuple = ()  # drvtma's median / the variant's, per round: above 1, the variant is faster
    versus_note: str = ""  # why the variant was not timed (a rule refused it, or its result was wrong)

    def tflops(self, ms: float) -> float:
        return 2.0 * self.m * self.n * self.k / (ms * 1e-3) / 1e12

    @property
    def ratio(self) -> float:
        """The median of the ABBA pairs' ratios (one pair's clock or neighbour cannot decide it); before any pair,
        the ratio of the medians."""
        return percentile(self.pair_ratios, 50) if self.pair_ratios else self.cublas_ms / self.ms

    def pairs_text(self) -> str:
        """The pairs' ratios as their range: how far the median stands from one pair's reading."""
        return f"{min(self.pair_ratios):.3f}-{max(self.pair_ratios):.3f}" if self.pair_ratios else "-"

    @property
    def versus_speedup(self) -> float:
        """The median of the rounds' drvtma / variant ratios (above 1: the variant is faster)."""
        return percentile(self.versus_pair_speedups, 50) if self.versus_pair_speedups else float("nan")

    @property
    def versus_ratio(self) -> float:
        """The variant's own ratio to cuBLAS: the median of the rounds' ratios."""
        return percentile(self.versus_pair_ratios, 50) if self.versus_pair_ratios else float("nan")

    def figure(self) -> dict:
        out = {"bench": "gemm", "dtype": self.dtype, "m": self.m, "n": self.n, "k": self.k,
               "tflops": round(self.tflops(self.ms), 1), "cublas_tflops": round(self.tflops(self.cublas_ms), 1),
               "ratio": round(self.ratio, 3), "pair_ratios": list(self.pair_ratios), "config": self.config,
               **timing_figure(self.timings)}
        if self.versus_config:
            out["versus"] = {"config": self.versus_config, "note": self.versus_note} if self.versus_note else {
                "config": self.versus_config, "ratio": round(self.versus_ratio, 3),
                "pair_ratios": list(self.versus_pair_ratios), "speedup": round(self.versus_speedup, 3),
                "pair_speedups": list(self.versus_pair_speedups)}
        return out


def error_against_cublas(ours, theirs, dc, dref, cfg: GemmConfig, m: int, n: int, k: int) -> float:
    """cuBLAS (`theirs`) into a poisoned `dref`, drvtma's checked run (poisoned C) into `dc`: the worst element's
    error in units of the tolerance (`compare`)."""
    out = value_dtype(cfg.out_dtype)
    dref.fill_u32(POISON_U32)
    theirs()
    if hasattr(theirs, "copy_back"):
        theirs.copy_back()
    ours.run_checked()
    return compare(dc.download(out, (m, n)), dref.download(out, (m, n)), cfg.out_dtype, cfg.dtype, k)


UNSUPPORTED = "not run, cuBLAS cannot"  # a point's note when cuBLAS has no kernel for it (no failure)


def bench_point(gemm, cublas, dtype: str, m: int, n: int, k: int, *, runs: int, warmups: int, flush,
                rng: np.random.Generator, alpha: float, pairs: int = PAIRS, versus=None) -> GemmPoint:
    """One shape: verified against cuBLAS, then timed in `pairs` ABBA pairs sharing `runs` per side. `versus`: a
    second Gemm (a variant of the configuration), verified too and timed in the same rounds (drvtma, variant,
    cuBLAS, cuBLAS, variant, drvtma), so their ratio is of one run; a wrong variant is reported and not timed."""
    from ..runtime.driver import DeviceBuffer
    from .cublas import CublasUnsupported, kernel_names

    cfg = gemm.config
    out = value_dtype(cfg.out_dtype)
    point = GemmPoint(dtype, m, n, k)
    a, b = random_operands(rng, dtype, m, n, k)
    with DeviceBuffer.from_array(a) as da, DeviceBuffer.from_array(b) as db, \
            DeviceBuffer(m * n * out.itemsize) as dc, DeviceBuffer(m * n * out.itemsize) as dref, \
            DeviceBuffer(m * n * out.itemsize if versus is not None else 1) as dv, \
            gemm.bind(da, db, dc, m, n, k, alpha=alpha) as ours, \
            (versus.bind(da, db, dv, m, n, k, alpha=alpha) if versus is not None else contextlib.nullcontext()) \
            as variant:
        try:
            theirs = cublas.plan(da, db, dref, m, n, k, dtype, cfg.out_dtype, alpha)
        except CublasUnsupported as exc:  # e5m2 x e5m2: the bench times against cuBLAS, so this point cannot run
            point.note = f"{UNSUPPORTED}: {exc}"
            return point
        try:
            point.max_error = error_against_cublas(ours, theirs, dc, dref, cfg, m, n, k)
            point.cublas_algo = cublas.describe()
            point.cublas_kernels = kernel_names(theirs)
            point.verified = point.max_error <= 1.0
            if not point.verified:
                point.note = f"MISMATCH vs cuBLAS ({point.max_error:.3g} x tolerance): not timed"
                return point
            launches = {"drvtma": ours.launch}
            if variant is not None:
                point.versus_config = versus.config.label()
                error = error_against_cublas(variant, theirs, dv, dref, versus.config, m, n, k)
                if error <= 1.0:
                    launches["versus"] = variant.launch
                else:
                    point.versus_note = f"MISMATCH vs cuBLAS ({error:.3g} x tolerance): not timed"
            launches["cublas"] = theirs
            point.smi_before = read_smi()
            timed = time_abba_pairs(launches, pairs=pairs, runs=runs, warmups=warmups, flush=flush)
            point.smi_after = read_smi()
            point.timings, point.pair_ratios = timed.joined, timed.ratios("cublas", "drvtma")
            point.ms, point.cublas_ms = point.timings["drvtma"].median, point.timings["cublas"].median
            if "versus" in launches:
                point.versus_ms = point.timings["versus"].median
                point.versus_pair_ratios = timed.ratios("cublas", "versus")
                point.versus_pair_speedups = timed.ratios("drvtma", "versus")
        finally:
            theirs.release()
    return point


def run_gemm_bench(config: GemmConfig, *, dtypes=DTYPES, shapes=SHAPES, runs: int = 20, warmups: int = 3,
                   flush_l2: bool = True, backend: str | None = None, seed: int = 15, progress=None,
                   auto: bool = True, pairs: int = PAIRS, versus: dict | None = None):
    """`auto`: each shape runs config.for_problem (the small tile for skinny problems); the point names it.
    `versus` ({field: value}): each point also runs its configuration with these fields changed, in the same
    rounds (`bench_point`); where a rule refuses the variant, the point says which."""
    from ..runtime.driver import DeviceBuffer, device_properties
    from .cublas import open_cublas
    from .launch import Gemm, warm_gemm_cache

    props = device_properties()  # no GPU: NoGpuError before anything else

    def chosen(dtype: str, m: int, n: int, k: int) -> GemmConfig:
        base = config.with_(dtype=dtype)
        return base.for_problem(m, n, k, props.sm_count, props.l2_bytes) if auto else base

    def variant(cfg: GemmConfig) -> GemmConfig | GemmError | None:
        """The point's configuration with --versus's changes, or the first rule they break."""
        if not versus:
            return None
        try:
            changed = cfg.with_(**versus)
        except GemmError as exc:  # a value of the wrong type for its field
            return exc
        errors = changed.errors()
        return errors[0] if errors else changed

    dtypes = [dtype_name(d) for d in dtypes]
    variants = {cfg: variant(cfg) for cfg in (chosen(d, *shape) for d in dtypes for shape in shapes)}
    warm_gemm_cache(list(variants) + [v for v in variants.values() if isinstance(v, GemmConfig)])
    cublas = open_cublas(backend)
    flush_buf = DeviceBuffer(2 * props.l2_bytes) if flush_l2 else None
    flush = (lambda: flush_buf.fill_u32(0x5A5A5A5A)) if flush_buf is not None else None
    rng = np.random.default_rng(seed)
    points = []
    gemms: dict[GemmConfig, Gemm] = {}
    try:
        for dtype in dtypes:
            alpha = 0.5 if dtype.startswith("float8") else 1.0  # per-tensor scales: scale_a x scale_b
            for m, n, k in shapes:
                base = config.with_(dtype=dtype)
                cfg = chosen(dtype, m, n, k)
                other = variants[cfg]
                for c in (cfg, other):
                    if isinstance(c, GemmConfig) and c not in gemms:
                        gemms[c] = Gemm(c)
                p = bench_point(gemms[cfg], cublas, dtype, m, n, k, runs=runs, warmups=warmups, flush=flush,
                                rng=rng, alpha=alpha, pairs=pairs,
                                versus=gemms[other] if isinstance(other, GemmConfig) else None)
                p.config = cfg.label()
                if isinstance(other, GemmError):
                    changes = ", ".join(f"{k}={v}" for k, v in (versus or {}).items())
                    p.versus_config, p.versus_note = f"{cfg.label()} with {changes}", f"refused: {other}"
                points.append(p)
                if p.verified:
                    record(p.figure())
                if progress is not None:
                    print(row_text(p, base.label()), file=progress, flush=True)
    finally:
        if flush_buf is not None:
            flush_buf.close()
        cublas.close()
    return GemmBenchResult(config, points, cublas.describe(), flush_l2, runs, pairs, dict(versus or {}))


def row_text(p: GemmPoint, base_label: str = "") -> str:
    """One point as a line of text; its configuration in brackets where it is not `base_label`."""
    if not p.verified:
        return f"{p.dtype:<14} {p.m:>6} {p.n:>6} {p.k:>6}  {p.note}"
    clocks = f"SM {p.smi_before.get('sm_mhz', '?')}->{p.smi_after.get('sm_mhz', '?')} MHz, " \
             f"{p.smi_before.get('power_w', '?')}->{p.smi_after.get('power_w', '?')} W"
    return (f"{p.dtype:<14} {p.m:>6} {p.n:>6} {p.k:>6}  {p.tflops(p.ms):7.1f} {p.tflops(p.cublas_ms):7.1f} "
            f"{p.ratio:6.3f} (pairs {p.pairs_text()})  err {p.max_error:.2f}  {clocks}"
            + (f"  [{p.config}]" if p.config != base_label else "") + versus_text(p))


def versus_text(p: GemmPoint) -> str:
    """The variant's outcome at a point: its speed-up over the configuration (median and the rounds' range) and
    its own ratio to cuBLAS, or why it did not run; empty without --versus."""
    if not p.versus_config:
        return ""
    if p.versus_note:
        return f"  versus: {p.versus_note}"
    sp = p.versus_pair_speedups
    return f"  versus: x{p.versus_speedup:.3f} ({min(sp):.3f}-{max(sp):.3f}), ratio {p.versus_ratio:.3f}"


@dataclass
class GemmBenchResult:
    config: GemmConfig
    points: list
    cublas: str
    flush_l2: bool
    runs: int
    pairs: int = PAIRS
    versus: dict = field(default_factory=dict)  # the fields --versus changed (empty: none)

    def timing_line(self) -> str:
        versus = ", ".join(f"{k}={v}" for k, v in self.versus.items())
        return (f"{self.runs} runs each in {self.pairs} ABBA pairs, L2 "
                f"{'flushed before each run' if self.flush_l2 else 'warm'}; TFLOP/s from the median run, ratio: "
                f"the median of the pairs' ratios"
                + (f"; versus: the same configuration with {versus}, timed in the same rounds (drvtma, variant, "
                   f"cuBLAS, cuBLAS, variant, drvtma): its speed-up over drvtma's and its own ratio, medians of "
                   f"the rounds'" if versus else ""))

    def text(self) -> str:
        head = (f"drvtma {self.config.label()}\ncuBLAS: {self.cublas}\n"
                f"{self.timing_line()}; tolerance |d| <= 2^-7|ref| (bf16 out) + {ATOL:g} max|ref| "
                f"(fp8 inputs: {ATOL_FP8:g} sqrt(max(1, K / {FP8_ATOL_K})) max|ref|)\n"
                f"{'dtype':<14} {'m':>6} {'n':>6} {'k':>6}  {'TFLOP/s':>7} {'cuBLAS':>7} {'ratio':>6}")
        return "\n".join([head, *(row_text(p, self.base_label(p)) for p in self.points)])

    def base_label(self, p: GemmPoint) -> str:
        """The label of the bench's configuration at this point's type: what a point that ran it need not repeat."""
        return self.config.with_(dtype=p.dtype).label()

    def chosen(self, p: GemmPoint) -> str:
        """The configuration the point ran, where it is not the bench's own (for_problem chose another)."""
        return p.config if p.config != self.base_label(p) else ""

    def csv_text(self) -> str:
        rows = []
        for p in self.points:
            ok = p.verified
            rows.append([p.dtype, p.m, p.n, p.k, f"{p.ms:.4f}", f"{p.tflops(p.ms):.1f}" if ok else "",
                         f"{p.cublas_ms:.4f}", f"{p.tflops(p.cublas_ms):.1f}" if ok else "",
                         f"{p.ratio:.3f}" if ok else "", f"{p.max_error:.3g}", ok, p.smi_before.get("sm_mhz", ""),
                         p.smi_after.get("sm_mhz", ""), p.smi_before.get("power_w", ""),
                         p.smi_after.get("power_w", ""), p.smi_after.get("reasons", ""),
                         "|".join(p.cublas_kernels).replace(",", ";"),
                         *("|".join(f"{t:.4f}" for t in p.timings[side].samples) if p.timings else ""
                           for side in ("drvtma", "cublas")), "|".join(f"{r:.4f}" for r in p.pair_ratios),
                         p.versus_config, f"{p.versus_ms:.4f}" if p.versus_pair_ratios else "",
                         f"{p.versus_ratio:.3f}" if p.versus_pair_ratios else "",
                         f"{p.versus_speedup:.3f}" if p.versus_pair_ratios else "",
                         "|".join(f"{r:.4f}" for r in p.versus_pair_speedups), p.versus_note])
        return csv_text(CSV_COLUMNS, rows)

    def markdown(self, command: str) -> str:
        rows = []
        for p in self.points:
            if not p.verified:
                row = [p.dtype, p.m, p.n, p.k, p.note, *[""] * 7, self.chosen(p)]
            else:
                row = [p.dtype, p.m, p.n, p.k, f"{p.tflops(p.ms):.1f}", f"{p.tflops(p.cublas_ms):.1f}",
                       f"{p.ratio:.3f}", p.pairs_text(), f"{p.max_error:.2f}",
                       f"{p.smi_before.get('sm_mhz', '?')}->{p.smi_after.get('sm_mhz', '?')}",
                       f"{p.smi_before.get('power_w', '?')}->{p.smi_after.get('power_w', '?')}",
                       "; ".join(p.cublas_kernels)[:120], self.chosen(p)]
            rows.append(row + ([versus_text(p).removeprefix("  versus: ")] if self.versus else []))
        columns = MARKDOWN_COLUMNS + (("versus: speed-up (rounds), ratio",) if self.versus else ())
        table = table_text(columns, rows)
        return "\n".join([f"# {command}", "", f"- drvtma: {self.config.label()}", f"- cuBLAS: {self.cublas}",
                          f"- timing: {self.timing_line()}; events behind a stream hold", "", table, ""])


def gemm_command(args, argv: list[str], cfg: GemmConfig, shapes, claim_shape) -> int:
    """`drvtma bench gemm` once drvtma.cli.benches has parsed and checked its arguments (`cfg`, the shapes; the
    lists `args.dtypes` and `args.only_claims`)."""
    if args.claims:
        return _claims_command(args, argv, cfg, claim_shape)
    if args.profile:
        return _profile_command(args, argv, cfg, shapes)
    result = run_gemm_bench(cfg, dtypes=args.dtypes, shapes=shapes, runs=args.runs,
                            warmups=args.warmups, flush_l2=not args.no_flush, backend=args.backend,
                            progress=None if args.quiet else sys.stderr, pairs=args.pairs,
                            versus=getattr(args, "versus_changes", None))
    print(result.text())
    if args.out:
        write_report(args.out, "gemm", result.csv_text(),
                     markdown=result.markdown(" ".join(["drvtma bench gemm", *argv])))
    wrong_variant = any(pt.versus_note.startswith("MISMATCH") for pt in result.points)
    return 0 if all(pt.verified or pt.note.startswith(UNSUPPORTED) for pt in result.points) and not wrong_variant \
        else 1


def _profile_command(args, argv, cfg: GemmConfig, shapes) -> int:
    from ..runtime.driver import device_properties
    from .launch import warm_gemm_cache

    lines, figures = [], []
    props = device_properties()
    warm_gemm_cache([cfg.with_(dtype=dtype_name(d)).for_problem(m, n, k, props.sm_count, props.l2_bytes)
                     for d in args.dtypes for m, n, k in shapes], extra_defines=PROFILE_DEFINES)
    for dtype in args.dtypes:
        for m, n, k in shapes:  # the configuration the bench runs for the shape (for_problem), named per line
            chosen = cfg.with_(dtype=dtype_name(dtype)).for_problem(m, n, k, props.sm_count, props.l2_bytes)
            prof = profile_gemm(chosen, m, n, k)
            figures.append(prof.summary())
            record(figures[-1])
            lines.append(prof.text())
            print(lines[-1], flush=True)
    if args.out:
        cols = list(figures[0])
        csv = csv_text(cols, [[str(f[c]).replace(",", ";") for c in cols] for f in figures])
        md = "\n".join([f"# {' '.join(['drvtma bench gemm', *argv])}", "", f"- drvtma: {cfg.label()}", "",
                         *(f"- {line}" for line in lines), ""])
        write_report(args.out, "gemm-profile", csv, markdown=md)
    return 0


def config_changes(items) -> dict:
    """["cluster_m=2", "persistent=false"] -> {"cluster_m": 2, "persistent": False}, typed like GemmConfig's field."""
    from dataclasses import fields

    kinds = {f.name: f.type for f in fields(GemmConfig)}
    out: dict[str, bool | int | str | None] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or name not in kinds:
            raise ValueError(f"--set wants FIELD=VALUE with FIELD one of {', '.join(kinds)}; got {item!r}")
        kind = str(kinds[name])
        if kind.startswith("bool"):
            if text.lower() not in ("true", "false", "1", "0", "on", "off"):
                raise ValueError(f"--set {name} wants true or false, got {text!r}")
            out[name] = text.lower() in ("true", "1", "on")
        elif kind.startswith("int"):
            try:
                out[name] = None if text.lower() == "none" else int(text)
            except ValueError:
                raise ValueError(f"--set {name} wants a whole number, got {text!r}") from None
        else:
            out[name] = text
    return out


def _claims_command(args, argv, base: GemmConfig, shape) -> int:
    wanted = args.only_claims
    claims = [c for c in CLAIMS if not wanted or any(w in c for w in wanted)]
    result = run_claims(shape=shape, runs=args.runs, warmups=args.warmups, flush_l2=not args.no_flush,
                        backend=args.backend, claims=claims, base=base,
                        progress=None if args.quiet else sys.stderr)
    print(result.text())
    if args.out:
        write_report(args.out, "gemm-claims", result.csv_text(),
                     markdown=result.markdown(" ".join(["drvtma bench gemm", *argv])))
    return 0 if not any(p.note.startswith("MISMATCH") for p in result.points) else 1

