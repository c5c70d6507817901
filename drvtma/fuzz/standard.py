"""The standard campaigns: the seed and number of cases gpu-check runs for each `drvtma fuzz` target.

One table for both sides of the coverage promise: gpu-check runs exactly these campaigns on the GPU, recording
their coverage lines (`step`: its `drvtma fuzz` step, else the GPU test that runs it), and
tests/test_coverage_cpu.py builds the same cases on the CPU and checks that every class of each target's universe
is hit at least `coverage.MIN_HITS` times. A budget in cases, not seconds, so the cases (and their coverage) are the
same on every host.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Standard:
    target: str
    seed: int
    examples: int
    step: bool = True  # a `drvtma fuzz` step of gpu-check; False: a GPU test runs it (with the im2col probe tests)


STANDARD_CAMPAIGNS = (
    Standard("loads", 1, 2500),
    Standard("encode", 1, 12000),
    Standard("stores", 1, 12000),
    Standard("reductions", 1, 12000),
    Standard("im2col", 25, 2400, step=False),  # tests/test_im2col_gpu.py
    Standard("im2col_encode", 25, 10000, step=False),
)


@dataclass(frozen=True)
class KernelCampaign:
    """A campaign of a kernel of your own, as the GPU tests run tests/support/byo_gpu_kernels.py's runners: the target,
    the strategy drawing the maps, the seed and cases. `full`: the cases reach every class of the strategy's
    universe `coverage.MIN_HITS` times (a CPU test builds them and checks); False: a campaign the kernel's own pace
    keeps short, whose coverage line says what it left unhit."""

    target: str
    strategy: str
    seed: int
    examples: int
    full: bool = True
    signatures: int = 0  # triton: the pool of compile signatures (drvtma.fuzz.triton.signature_pool)
    max_boxes: int | None = None  # loads per case (None: the target's default)

    def options(self, target, kernel: str) -> dict:
        """`target.configure(...)` for this campaign of `kernel` (the pool drawn from the campaign's seed)."""
        boxes = {} if self.max_boxes is None else {"max_boxes": self.max_boxes}
        return target.configure(kernel=kernel, strategy=self.strategy, signatures=self.signatures,
                                signature_seed=self.seed, **boxes)

    def cli(self) -> list[str]:
        """The same campaign as `drvtma fuzz` options."""
        return (["--strategy", self.strategy, "--examples", str(self.examples), "--seed", str(self.seed)]
                + (["--signatures", str(self.signatures)] if self.signatures else [])
                + (["--max-boxes", str(self.max_boxes)] if self.max_boxes is not None else []))


KERNEL_CAMPAIGNS = (
    # Loads take up to 64 boxes a call: a case's own costs (its spec, its data, the call) are shared by more boxes,
    # and the boxes' classes come sooner (drvtma's: every class 20 times in 3,200 cases, not 5,600 of 16 boxes)
    KernelCampaign("kernel-loads", "drvtma", 1, 3200, max_boxes=64),  # tests/test_byo_fuzz_gpu.py (a .cu runner)
    KernelCampaign("kernel-stores", "drvtma", 1, 4300),
    KernelCampaign("kernel-reductions", "drvtma", 1, 7400),
    # tests/test_byo_toolchains_gpu.py (cuda.core's build): its spec classes need the cases, whatever the boxes
    KernelCampaign("kernel-loads", "cuda.core", 1, 3900, max_boxes=64),
    # Triton compiles a kernel per element type, block and padding (~0.1 s each, where a launch costs ~1 ms): a
    # pool of 35 signatures (every type with every row width) serves the whole campaign
    KernelCampaign("kernel-loads", "triton", 1, 1500, signatures=35, max_boxes=64),
    KernelCampaign("kernel-stores", "triton", 1, 1500, signatures=35),
)


def kernel_campaign(target: str, strategy: str) -> KernelCampaign:
    """The kernel campaign of `target` drawn by `strategy`."""
    return next(c for c in KERNEL_CAMPAIGNS if (c.target, c.strategy) == (target, strategy))


def standard(target: str) -> Standard:
    """The standard campaign of `target`."""
    return next(c for c in STANDARD_CAMPAIGNS if c.target == target)
