"""Fuzz your own kernel on the GPU: drvtma's ready runners (a .cu kernel of the documented signature, launched
through drvtma with the map by value) and Triton's desc.load / desc.store against the oracles, each with a figure
line, and planted bugs (a box off by one, a copy into shared memory one 16-byte chunk short) found, shrunk and
replayed. All pass on the H200 (docs/results/gpu-check-74b722e.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drvtma.cli.main import main
from drvtma.fuzz.standard import kernel_campaign
from drvtma.runtime.figures import record_figure

from support.byo_gpu_kernels import shrunk_repro_replays

pytestmark = pytest.mark.gpu

KERNELS = Path(__file__).parent / "support" / "byo_gpu_kernels.py"
# the drvtma runners' campaigns: enough cases to reach every coverage class 20 times (drvtma.fuzz.standard)
EXAMPLES = {t: str(kernel_campaign(f"kernel-{t}", "drvtma").examples) for t in ("stores", "reductions")}


def _uses_tma(direction: str = "load") -> bool:
    """Whether drvtma's build of the example kernel issues the TMA instruction (SASS UTMALDG / UTMASTG)."""
    from drvtma.runtime.compiler import compile_cubin
    from drvtma.runtime.sass import instructions

    ops = instructions(compile_cubin(KERNELS.with_name(f"byo_image_{direction}.cu")), f"image_{direction}")
    return any(op.startswith("UTMALDG" if direction == "load" else "UTMASTG") for op in ops)


def _fuzz(tmp_path, target: str, kernel: str, *extra: str) -> tuple[int, dict]:
    rc = main(["fuzz", target, "--kernel", f"{KERNELS}:{kernel}", *extra, "--quiet", "--no-db",
               "--out", str(tmp_path)])
    return rc, json.loads((tmp_path / f"kernel-{target}-report.json").read_text())


def _needs_triton() -> None:
    pytest.importorskip("triton", reason="triton is not installed (pip install triton)")
    pytest.importorskip("torch", reason="torch is not installed (the Triton runners' tensors)")


def test_drvtma_runner_matches_the_oracle(ctx, tmp_path):
    rc = main(["fuzz", "loads", "--kernel", f"{KERNELS}:drvtma_images", *kernel_campaign("kernel-loads", "drvtma").cli(),
               "--quiet", "--no-db", "--out", str(tmp_path)])
    js = json.loads((tmp_path / "kernel-loads-report.json").read_text())
    record_figure({"test": "byo_fuzz", "toolchain": "drvtma", "direction": "load", "cases": js["cases"],
                   "boxes": js["size"], "mismatches": js["mismatches"], "uses_tma": _uses_tma()})
    assert rc == 0 and js["mismatches"] == 0, (tmp_path / "kernel-loads-report.md").read_text()
    assert js["size"] >= 2000


def test_a_planted_off_by_one_is_shrunk_and_replayed(ctx, tmp_path, capsys):
    rc = main(["fuzz", "loads", "--kernel", f"{KERNELS}:drvtma_off_by_one", "--examples", "24", "--seed", "2",
               "--quiet", "--no-db", "--max-shrinks", "1", "--shrink-seconds", "120", "--out", str(tmp_path)])
    assert rc == 1
    assert len(shrunk_repro_replays(tmp_path, "loads", capsys)["case"]["coordinates"]) == 1


def test_triton_runner_matches_the_oracle(ctx, tmp_path):
    _needs_triton()
    from drvtma.fuzz.triton import last_ptx

    rc = main(["fuzz", "loads", "--kernel", f"{KERNELS}:triton_boxes", *kernel_campaign("kernel-loads", "triton").cli(),
               "--quiet", "--no-db", "--out", str(tmp_path)])
    js = json.loads((tmp_path / "kernel-loads-report.json").read_text())
    uses_tma = "cp.async.bulk.tensor" in last_ptx()
    record_figure({"test": "byo_fuzz", "toolchain": "triton", "direction": "load", "cases": js["cases"],
                   "boxes": js["size"], "mismatches": js["mismatches"], "uses_tma": uses_tma})
    assert rc == 0 and js["mismatches"] == 0, (tmp_path / "kernel-loads-report.md").read_text()
    assert uses_tma and js["size"] >= 2000


# ---- stores (and reductions) through the ready store runner and Triton's desc.store

def test_drvtma_store_runner_matches_the_oracle(ctx, tmp_path):
    rc, js = _fuzz(tmp_path, "stores", "drvtma_store_images", "--examples", EXAMPLES["stores"], "--seed", "1")
    record_figure({"test": "byo_fuzz", "toolchain": "drvtma", "direction": "store", "cases": js["cases"],
                   "boxes": js["size"], "mismatches": js["mismatches"], "uses_tma": _uses_tma("store")})
    assert rc == 0 and js["mismatches"] == 0, (tmp_path / "kernel-stores-report.md").read_text()
    assert js["size"] >= 500


def test_drvtma_store_runner_reduces_as_the_oracle(ctx, tmp_path):
    rc, js = _fuzz(tmp_path, "reductions", "drvtma_store_images", "--examples", EXAMPLES["reductions"],
                   "--seed", "1")
    assert rc == 0 and js["mismatches"] == 0, (tmp_path / "kernel-reductions-report.md").read_text()


def test_a_store_that_skips_the_last_chunk_is_shrunk_and_replayed(ctx, tmp_path, capsys):
    rc, _ = _fuzz(tmp_path, "stores", "drvtma_store_skips_chunk", "--examples", "100", "--seed", "2",
                  "--max-shrinks", "1", "--shrink-seconds", "120")
    assert rc == 1
    repro = shrunk_repro_replays(tmp_path, "stores", capsys)
    from drvtma.tma.tiled.spec import TensorMapSpec

    spec = TensorMapSpec.from_dict(repro["case"]["spec"])
    assert spec.smem_bytes <= 64 and spec.rank <= 2, repro["describe"]
    assert repro["result"]["first_differences"][0]["got"] != repro["result"]["first_differences"][0]["expected"]


def test_triton_store_runner_matches_the_oracle(ctx, tmp_path):
    _needs_triton()
    from drvtma.fuzz.triton import last_ptx

    rc, js = _fuzz(tmp_path, "stores", "triton_store_boxes", *kernel_campaign("kernel-stores", "triton").cli())
    uses_tma = "cp.async.bulk.tensor" in last_ptx()
    record_figure({"test": "byo_fuzz", "toolchain": "triton", "direction": "store", "cases": js["cases"],
                   "boxes": js["size"], "mismatches": js["mismatches"], "uses_tma": uses_tma})
    assert rc == 0 and js["mismatches"] == 0, (tmp_path / "kernel-stores-report.md").read_text()
    assert uses_tma and js["size"] >= 500
