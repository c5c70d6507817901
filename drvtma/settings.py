"""Every ``DRVTMA_*`` environment variable: its name, default and meaning, read here and nowhere else.

Each is read when asked (`Setting.get`), never cached: a test's monkeypatch or a script's environment for its
children takes effect at once. An empty value counts as unset. README's Environment section is `markdown()`
(tests/test_docs_cpu.py checks that they agree). Kernel defines named DRVTMA_* (DRVTMA_WAIT_TIMEOUT_NS, ...) are
compile options, not environment variables, and are not here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from .errors import ArgumentError


def flag(text: str) -> bool:
    """A switch: "0" is off, any other value on."""
    return text != "0"


def names(text: str) -> list[str]:
    """A comma-separated list, its items stripped and the empty ones dropped ("0, 1," -> ["0", "1"])."""
    return [v.strip() for v in text.split(",") if v.strip()]


@dataclass(frozen=True)
class Setting:
    """One variable: `kind` turns its text into a value (str, int, float or `flag`); `value` is what an unset
    variable means (None: the feature is off or chosen elsewhere, as `default` says); `suite`: read by the test suite
    and scripts, not by the package."""

    name: str
    kind: Callable
    value: object
    default: str
    meaning: str
    suite: bool = False

    def raw(self) -> str | None:
        """The variable's text, None when unset or empty."""
        return os.environ.get(self.name) or None

    def get(self):
        """The typed value, or `value` when unset; a value `kind` refuses is an ArgumentError naming the variable."""
        text = self.raw()
        if text is None:
            return self.value
        try:
            return self.kind(text)
        except ValueError:
            raise ArgumentError("environment", self.name, text, f"set it to {_KIND_TEXT[self.kind]} or unset it "
                                f"(default {self.default})") from None


_KIND_TEXT = {str: "text", int: "an integer", float: "a number", flag: "0 or 1", names: "a comma-separated list"}

CU_DIR = Setting("DRVTMA_CU_DIR", str, None, "the kernels shipped with drvtma", "use kernels from another folder")
CACHE_DIR = Setting("DRVTMA_CACHE_DIR", str, None, "`$XDG_CACHE_HOME/drvtma`, else `~/.cache/drvtma`",
                    "the folder of NVRTC's compile cache")
NO_CACHE = Setting("DRVTMA_NO_CACHE", flag, False, "0", "any value but 0: compile every kernel, no disk cache")
NVDISASM = Setting("DRVTMA_NVDISASM", str, None, "the `nvidia-cuda-nvdisasm` wheel, then the PATH",
                   "the nvdisasm to use for SASS listings")
HYPOTHESIS_PROFILE = Setting("DRVTMA_HYPOTHESIS_PROFILE", str, None, "none; drvtma's own tests load `ci`",
                             "`ci` or `gpu-long` (the plugin's `drvtma-ci` / `drvtma-gpu-long`), or any profile")
FUZZ_DB = Setting("DRVTMA_FUZZ_DB", str, None, "`~/.cache/drvtma/fuzz-db`", "the example database of `drvtma fuzz`")
REPORT_JSONL = Setting("DRVTMA_REPORT_JSONL", str, None, "none",
                       "a file every figure line is appended to (scripts/gpu-check sets it)")
KERNEL_LOG = Setting("DRVTMA_KERNEL_LOG", str, None, "none",
                     "a file each loaded kernel's name is appended to (scripts/sanitize.py sets it)")
CUBLAS_KERNEL_NAMES = Setting("DRVTMA_CUBLAS_KERNEL_NAMES", flag, True, "1",
                              "0: do not profile cuBLAS for its kernel names (a process that profiled once was "
                              "seen to crash at exit on the H200 image)")
ARCH = Setting("DRVTMA_ARCH", str, None, "chosen per kernel family and GPU (drvtma.runtime.families)",
               "build every kernel for this target (`compute_90`: PTX the driver JIT-compiles; `sm_90a`, `sm_120a`)")

FUZZ_SEED = Setting("DRVTMA_FUZZ_SEED", int, 1, "1", "the seed of the GPU tests' random cases", True)
FUZZ_SECONDS = Setting("DRVTMA_FUZZ_SECONDS", float, 3.0, "3", "seconds per campaign of tests/test_fuzz_gpu.py", True)
FUZZ_SPECS = Setting("DRVTMA_FUZZ_SPECS", int, 500, "500", "random specs of tests/test_probe_gpu.py", True)
FUZZ_BOXES = Setting("DRVTMA_FUZZ_BOXES", int, 2000, "2000", "random boxes of tests/test_probe_gpu.py", True)
FUZZ_STORES = Setting("DRVTMA_FUZZ_STORES", int, 1000, "1000", "random store cases of tests/test_stores_gpu.py",
                      True)
FUZZ_WGMMA = Setting("DRVTMA_FUZZ_WGMMA", int, 600, "600", "random wgmma cases of tests/test_wgmma_gpu.py", True)
FUZZ_MULTICAST = Setting("DRVTMA_FUZZ_MULTICAST", int, 3000, "3000",
                         "random multicasts of tests/test_cluster_gpu.py", True)
DECODE_SPECS = Setting("DRVTMA_DECODE_SPECS", int, 100000, "100000",
                       "the decode round trip's size in tests/test_tensormap_global_gpu.py", True)
REPLACE_DUMPS = Setting("DRVTMA_REPLACE_DUMPS", str, None, "none",
                        "a JSON file for the device's tensormap.replace edits (the CPU tests' data)", True)
WGMMA_DUMP = Setting("DRVTMA_WGMMA_DUMP", str, None, "none",
                     "a folder for tests/test_wgmma_gpu.py's raw gather maps (npz)", True)
COMMIT = Setting("DRVTMA_COMMIT", str, None, "`git rev-parse HEAD`", "the commit scripts/gpu-check names", True)

# Set by the engines that run a campaign's shards (`drvtma fuzz --shard`) and its pytest workers (the plugin); not
# drvtma's own, so neither in SETTINGS nor in README's list.
SLURM_TASK_ID = Setting("SLURM_ARRAY_TASK_ID", int, None, "none", "this Slurm array task's index")
SLURM_TASK_MIN = Setting("SLURM_ARRAY_TASK_MIN", int, 0, "0", "the array's first index (--array=1-4: 1)")
SLURM_TASK_COUNT = Setting("SLURM_ARRAY_TASK_COUNT", int, None, "none", "the Slurm array's number of tasks")
SLURM_TASK_MAX = Setting("SLURM_ARRAY_TASK_MAX", int, None, "none", "the array's last index (--array=1-4: 4)")
SLURM_TASK_STEP = Setting("SLURM_ARRAY_TASK_STEP", int, 1, "1", "the array's index step (--array=0-6:2: 2)")
JOB_COMPLETION_INDEX = Setting("JOB_COMPLETION_INDEX", int, None, "none", "a Kubernetes Indexed Job pod's index")
XDIST_WORKER = Setting("PYTEST_XDIST_WORKER", str, None, "none", "pytest-xdist's worker name (gw0, gw1, ...)")
VISIBLE_DEVICES = Setting("CUDA_VISIBLE_DEVICES", names, None, "every GPU", "the GPUs CUDA may use")

SETTINGS = tuple(v for v in globals().values() if isinstance(v, Setting) and v.name.startswith("DRVTMA_"))
FOREIGN = tuple(v for v in globals().values() if isinstance(v, Setting) and not v.name.startswith("DRVTMA_"))


def markdown() -> str:
    """README's Environment section (below its heading): one line per variable, the package's first."""
    def lines(suite: bool) -> list[str]:
        return [f"- `{s.name}` (default: {s.default}): {s.meaning}." for s in SETTINGS if s.suite == suite]

    return "\n".join(["Read by drvtma (`drvtma/settings.py`):", "", *lines(False), "",
                      "Read by the test suite and scripts:", "", *lines(True)]) + "\n"
