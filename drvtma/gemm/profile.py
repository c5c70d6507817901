"""Where the GEMM's cycles go (`drvtma bench gemm --profile`): a GEMM_PROFILE=1 build of the same configuration
counts, per CTA, the SM cycles its producer waited for an empty stage, its first consumer warpgroup waited for a
full stage and spent in epilogues, that warpgroup's whole run, and the run's %globaltimer interval.

From those: the SM clock the run ran at (cycles / ns), the tensor issue rate (FLOP per SM cycle against the dense
peak of 4096 for 16-bit inputs, 8192 for fp8), the share of time starved of data (full waits: loads bound), held
back by a full ring (empty waits: the math bounds), in epilogues, and the tail (SMs idle while the last CTAs
finish: tile quantization). The counters cost a few instructions per stage: the profile build is not the timed one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import GemmConfig
from .reference import random_operands, value_dtype

SLOTS = ("empty_wait", "full_wait", "epilogue", "consumer_cycles", "tiles", "smid", "start_ns", "end_ns")
PEAK_FLOP_PER_CYCLE = {2: 4096, 1: 8192}  # dense, per SM (989.4 TFLOP/s = 132 x 1.83 GHz x 4096)


@dataclass
class RingProfile:
    config: GemmConfig
    m: int
    n: int
    k: int
    per_cta: np.ndarray  # [CTAs, len(SLOTS)] uint64

    def column(self, name: str) -> np.ndarray:
        return self.per_cta[:, SLOTS.index(name)].astype(np.float64)

    @property
    def span_ns(self) -> float:
        return float(self.column("end_ns").max() - self.column("start_ns").min())

    @property
    def clock_mhz(self) -> float:
        """The SM clock the consumers ran at: their cycles over their nanoseconds, all CTAs together."""
        return float(self.column("consumer_cycles").sum() / (self.column("end_ns") - self.column("start_ns")).sum()
                     * 1e3)

    @property
    def issue_rate(self) -> float:
        """Dense FLOP per SM cycle while a CTA runs, as a fraction of the tensor cores' peak."""
        flops = 2.0 * self.config.bm * self.config.bn * self.k * self.column("tiles")
        return float(flops.sum() / self.column("consumer_cycles").sum() / PEAK_FLOP_PER_CYCLE[self.config.itemsize])

    def fraction(self, name: str) -> float:
        return float(self.column(name).sum() / self.column("consumer_cycles").sum())

    @property
    def tail(self) -> float:
        """The share of SM time idle inside the kernel's span: CTAs that finished before the last one did."""
        busy = (self.column("end_ns") - self.column("start_ns")).sum()
        return float(1.0 - busy / (self.span_ns * len(self.per_cta)))

    def summary(self) -> dict:
        return {"bench": "gemm_profile", "dtype": self.config.dtype, "m": self.m, "n": self.n, "k": self.k,
                "cluster_m": self.config.cluster_m, "cluster_n": self.config.cluster_n, "ctas": len(self.per_cta),
                "clock_mhz": round(self.clock_mhz), "issue_rate": round(self.issue_rate, 3),
                "full_wait": round(self.fraction("full_wait"), 3),
                "empty_wait": round(self.fraction("empty_wait"), 3),
                "epilogue": round(self.fraction("epilogue"), 3), "tail": round(self.tail, 3),
                "tiles_per_cta": [int(self.column("tiles").min()), int(self.column("tiles").max())],
                "span_us": round(self.span_ns / 1e3, 1), "config": self.config.label()}

    def text(self) -> str:
        s = self.summary()
        return (f"{self.config.dtype} {self.m}x{self.n}x{self.k}: {s['ctas']} CTAs at {s['clock_mhz']} MHz, issue "
                f"{100 * s['issue_rate']:.1f}% of peak per cycle; consumer time: full waits {100 * s['full_wait']:.1f}%"
                f", epilogue {100 * s['epilogue']:.1f}%; producer empty waits {100 * s['empty_wait']:.1f}%; tail "
                f"{100 * s['tail']:.1f}% ({s['tiles_per_cta'][0]}-{s['tiles_per_cta'][1]} tiles a CTA), "
                f"span {s['span_us']} us [{s['config']}]")


PROFILE_DEFINES = {"GEMM_PROFILE": 1}  # the counting build's defines, on top of the configuration's


def profile_gemm(config: GemmConfig, m: int, n: int, k: int, *, rng=None, runs: int = 2) -> RingProfile:
    """Run the profile build on random operands (`runs` times: the last one counts) and read its counters."""
    from ..runtime.driver import DeviceBuffer
    from .launch import Gemm

    rng = rng if rng is not None else np.random.default_rng(15)
    gemm = Gemm(config, extra_defines=PROFILE_DEFINES)
    a, b = random_operands(rng, config.dtype, m, n, k)
    out = value_dtype(config.out_dtype)
    with DeviceBuffer.from_array(a) as da, DeviceBuffer.from_array(b) as db, \
            DeviceBuffer(m * n * out.itemsize) as dc, gemm.bind(da, db, dc, m, n, k) as op, \
            DeviceBuffer(op.grid * len(SLOTS) * 8) as counters:
        op.attach_profile(counters)
        for _ in range(runs):
            counters.fill_u32(0)
            op.run_checked()
        per_cta = counters.download(np.uint64, (op.grid, len(SLOTS)))
    result = RingProfile(config, m, n, k, per_cta)
    expected = config.cluster_tiles(*config.kernel_extents(m, n)) * config.cluster_size
    if int(result.column("tiles").sum()) != expected:  # every CTA wrote its counters, each tile counted once
        raise RuntimeError(f"profile counted {int(result.column('tiles').sum())} tiles, the problem has {expected}")
    return result
