"""Fuzz your own kernel on the GPU: drvtma's ready runner (a .cu kernel of the documented signature, launched
through drvtma with the map by value) against the oracle, and a planted bug found, shrunk and replayed.
Not yet run on a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drvtma.cli.main import main
from drvtma.runtime.figures import record_figure

pytestmark = pytest.mark.gpu

KERNELS = Path(__file__).with_name("byo_gpu_kernels.py")


def _uses_tma() -> bool:
    from drvtma.runtime.compiler import compile_cubin
    from drvtma.runtime.sass import instructions

    ops = instructions(compile_cubin(Path(__file__).with_name("byo_image_load.cu")), "image_load")
    return any(op.startswith("UTMALDG") for op in ops)


def test_drvtma_runner_matches_the_oracle(ctx, tmp_path):
    rc = main(["fuzz", "loads", "--kernel", f"{KERNELS}:drvtma_images", "--examples", "320", "--seed", "1",
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
    path = next(p for p in sorted(tmp_path.glob("repro-kernel-loads-*.json")) if json.loads(p.read_text())["shrunk"])
    repro = json.loads(path.read_text())
    assert len(repro["case"]["coordinates"]) == 1
    capsys.readouterr()
    assert main(["repro", str(path)]) == 1
    assert "same diff as recorded" in capsys.readouterr().out


def test_triton_runner_matches_the_oracle(ctx, tmp_path):
    pytest.importorskip("triton", reason="triton is not installed (pip install triton)")
    pytest.importorskip("torch", reason="torch is not installed (the Triton runner's tensors)")
    from drvtma.fuzz.triton import last_ptx

    rc = main(["fuzz", "loads", "--kernel", f"{KERNELS}:triton_boxes", "--strategy", "triton", "--examples", "320",
               "--seed", "1", "--quiet", "--no-db", "--out", str(tmp_path)])
    js = json.loads((tmp_path / "kernel-loads-report.json").read_text())
    uses_tma = "cp.async.bulk.tensor" in last_ptx()
    record_figure({"test": "byo_fuzz", "toolchain": "triton", "direction": "load", "cases": js["cases"],
                   "boxes": js["size"], "mismatches": js["mismatches"], "uses_tma": uses_tma})
    assert rc == 0 and js["mismatches"] == 0, (tmp_path / "kernel-loads-report.md").read_text()
    assert uses_tma and js["size"] >= 2000
