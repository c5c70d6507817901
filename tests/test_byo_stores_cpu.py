"""drvtma's ready store runner on the CPU: its kernel (tests/support/byo_image_store.cu) and the planted-bug build
compile to TMA stores, the runner refuses what would fault before any launch, and the kernel done in NumPy on the
image the runner builds (tests/support/byo_kernels.py) passes the stores fuzz while the planted bug is found and
shrunk."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from drvtma.cli.main import main
from drvtma.errors import ArgumentError, TensorMapError
from drvtma.fuzz.kernel import GUARD_BYTES, StoreKernel
from drvtma.fuzz.runners import CuStoreRunner, store_arguments
from drvtma.fuzz.user import fuzz_kernel
from drvtma.tma.tiled.spec import TensorMapSpec

from support import byo_kernels as B

STORE_CU = Path(B.__file__).with_name("byo_image_store.cu")


def _cubin(defines=None) -> bytes:
    from drvtma.runtime.compiler import compile_cubin

    return compile_cubin(STORE_CU, defines=defines)


@pytest.mark.parametrize("defines", [None, {"SKIP_LAST_CHUNK": 1}])
def test_the_store_kernel_compiles_to_tensor_stores(defines):
    from drvtma.runtime.sass import instructions

    ops = set(instructions(_cubin(defines), "image_store"))
    assert {f"UTMASTG.{r}D" for r in range(1, 6)} <= ops, sorted(ops)
    assert {"UTMAREDG.2D.ADD", "UTMAREDG.2D.XOR"} <= ops  # reductions too: `drvtma fuzz reductions` runs it
    assert not any(op.startswith("UTMALDG") for op in ops)


def test_the_planted_bug_is_another_build():
    assert _cubin() != _cubin({"SKIP_LAST_CHUNK": 1})


def test_the_runner_meets_the_protocol():
    assert isinstance(CuStoreRunner(STORE_CU, "image_store"), StoreKernel)


def _case(op="store", coords=(1, 16)):
    spec = TensorMapSpec.create("uint32", (10, 40), (4, 8))
    memory = np.zeros(2 * GUARD_BYTES + spec.extent_bytes, np.uint8)
    box = np.arange(32, dtype=np.uint32).reshape(4, 8)
    return [memory, GUARD_BYTES, spec, np.array(coords), box, op]


@pytest.mark.parametrize("change, error, match", [
    ((3, np.array((-1, 16))), TensorMapError, "store_negative_coordinate"),
    ((3, np.array((1, 2))), TensorMapError, "16"),  # an inner coordinate off a 16-byte boundary faults
    ((3, np.array((1, 2, 3))), TensorMapError, "coord_rank"),
    ((5, "sideways"), ArgumentError, "runner_op"),
    ((4, np.zeros((4, 4), np.uint32)), ArgumentError, r"runner_box.*\(4, 8\)"),
    ((0, np.zeros(4096, np.float32)), ArgumentError, "runner_memory"),
    ((1, 8), ArgumentError, "runner_base"),
    ((1, 4096), ArgumentError, "runner_base"),
    ((2, "not a spec"), ArgumentError, "runner_spec"),
])
def test_the_runner_refuses_what_would_fault_before_any_launch(change, error, match):
    args = _case()
    args[change[0]] = change[1]
    with pytest.raises(error, match=match):
        CuStoreRunner(STORE_CU, "image_store")(*args)  # raises before it loads the kernel: no GPU needed


def test_a_reduction_the_type_lacks_is_refused():
    args = _case(op="inc")
    args[2] = TensorMapSpec.create("float32", (10, 40), (4, 8))
    args[4] = args[4].astype(np.float32)
    with pytest.raises(TensorMapError, match="reduce_dtype"):
        store_arguments(*args)


@pytest.mark.parametrize("source, name, match", [(None, "image_store", "runner_source"),
                                                 (STORE_CU, "image store", "runner_kernel"),
                                                 (STORE_CU, 3, "runner_kernel")])
def test_the_runner_names_a_wrong_kernel(source, name, match):
    with pytest.raises(ArgumentError, match=match):
        CuStoreRunner(source, name)


def test_the_image_holds_the_box_where_the_store_reads_it():
    memory, base, spec, coords, box, op = _case()
    tma, code, image = store_arguments(memory, base, spec, coords, box, op)
    assert list(tma) == [16, 1, 0, 0, 0] and code == -1 and image.size == spec.smem_bytes
    assert (image.view(np.uint32).reshape(4, 8) == box).all()  # no swizzle, a 32-byte row: the box as it is


STRATEGIES = ["drvtma", "cuda.core"]  # drvtma's maps (drvtma's and nvcc's builds), as_tensor_map's (cuda.core's)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("direction", ["stores", "reductions"])
def test_the_runners_kernel_in_numpy_passes(direction, strategy):
    result, _ = fuzz_kernel(B.image_store, direction=direction, examples=100, seed=5, strategy=strategy)
    assert result.cases == 100 and result.mismatches == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_planted_bug_in_numpy_is_found_shrunk_and_replayed(tmp_path, capsys, strategy):
    """The GPU tests' campaigns (same seed, same options) with the kernel done in NumPy: what the GPU should find."""
    kernels = Path(B.__file__).resolve()
    rc = main(["fuzz", "stores", "--kernel", f"{kernels}:image_store_skips_chunk", "--strategy", strategy,
               "--examples", "100", "--seed", "2", "--quiet", "--no-db", "--max-shrinks", "1", "--shrink-seconds",
               "120", "--out", str(tmp_path)])
    assert rc == 1
    path = next(p for p in sorted(tmp_path.glob("repro-kernel-stores-*.json")) if json.loads(p.read_text())["shrunk"])
    repro = json.loads(path.read_text())
    spec = TensorMapSpec.from_dict(repro["case"]["spec"])
    assert spec.smem_bytes <= 64 and spec.rank <= 2, repro["describe"]
    capsys.readouterr()
    assert main(["repro", str(path)]) == 1
    assert "same diff as recorded" in capsys.readouterr().out
