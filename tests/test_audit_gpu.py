"""`drvtma audit` on the GPU: drvtma's own maps caught in-process and read back from the launches; each example
program of examples/audit (drvtma's GEMM, Triton, torch's cuBLAS / cuDNN / attention, JAX) audited through the
command line, with a figure line per library; and the audit's own cost (timing). Needs cupti-python (the `audit`
extra): skipped with that one line without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from drvtma.audit.judge import judge
from drvtma.runtime.figures import record_figure
from drvtma.testing.plugin import skip_unless

pytestmark = pytest.mark.gpu
pytest.importorskip("cupti", reason="cupti-python is not installed (pip install 'drvtma[audit]')")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "audit"


def test_drvtma_maps_are_caught_decoded_and_found_in_their_launches(drvtma_audit):
    import drvtma

    # a module loaded inside the audit (a fresh build), so its parameter layout comes from the module load
    kernel = drvtma.load_module("runtime/launch_cost.cu", defines={"DRVTMA_AUDIT_FRESH": uuid.uuid4().hex[:8]}) \
        .kernel("map_args")
    with drvtma.DeviceBuffer(1 << 20) as buf:
        specs = [drvtma.TensorMapSpec.create("float16", (300, 200), (128, 64), base_address=buf.ptr, swizzle=3),
                 drvtma.TensorMapSpec.create("bfloat16", (64, 256), (64, 64), base_address=buf.ptr + 4096),
                 drvtma.TensorMapSpec.create("float32", (8, 16, 32), (2, 4, 32), base_address=buf.ptr + 65536,
                                             l2_promotion=2)]
        maps = [drvtma.encode_tiled(s) for s in specs]
        for _ in range(3):
            for tm in maps:
                kernel.launch(tm, buf.ptr, 0, 0.0, grid=1, block=32)
        drvtma.synchronize()
    j = judge(drvtma_audit.events)
    assert not drvtma_audit.capture.counts.errors, drvtma_audit.capture.counts.errors
    encoded = [m for m in j.maps.values() if m.encodes]
    assert len(encoded) == 3 and all(m.agrees and m.driver_written for m in encoded)
    for m in encoded:
        assert m.launch_count == 3 and {u.parameter for u in m.launches} == {0}, m.launches
        assert m.libraries == ["drvtma"], m.libraries
    assert not j.not_encoded() and not j.never_launched()


def test_a_map_in_global_memory_is_found_behind_the_pointer_the_kernel_gets(tmp_path):
    """--follow-pointers: drvtma's map copied to global memory and loaded through a pointer (as XLA passes its
    maps) is the encoded map, launched by pointer at the slot's address; without following it is never launched."""
    import numpy as np

    import drvtma
    from drvtma.audit import audit
    from drvtma.tma.maps.global_maps import GlobalMapRunner, MapSlots

    results = {}
    for follow in (True, False):
        fresh = {"DRVTMA_AUDIT_FRESH": uuid.uuid4().hex[:8]}  # loaded inside the audit: its layout is known
        with drvtma.DeviceBuffer(1 << 16) as buf, MapSlots(2) as slots, \
                audit(tmp_path / str(follow), follow_pointers=follow) as log:
            runner = GlobalMapRunner(defines=fresh)
            spec = drvtma.TensorMapSpec.create("float32", (64, 64), (16, 32), base_address=buf.ptr)
            slots.write(1, drvtma.encode_tiled(spec))
            runner.load_global(slots.address(1), spec, np.array([[0, 0], [16, 32]]))
            runner.close()
        results[follow] = (log.judgement, slots.address(1))
    j, slot = results[True]
    (v,) = [m for m in j.maps.values() if m.encodes]
    uses = [u for u in v.launches if u.via == "pointer"]
    assert uses and all(u.pointer + u.delta == slot and u.launch.kernel.endswith("global_map_load") for u in uses)
    assert v.agrees and v not in j.never_launched()
    j, _ = results[False]
    assert [m for m in j.maps.values() if m.encodes][0] in j.never_launched()
    record_figure({"test": "audit_behind_pointers", "program": "drvtma global_map_load",
                   "found": len(uses), "delta": uses[0].delta})


CASES = {  # name: (program, what it needs: a module, or drvtma's GEMM's capabilities)
    "drvtma": (["drvtma_gemm.py"], ("wgmma", "setmaxnreg")),
    "triton": (["triton_matmul.py"], "triton"),
    "torch_matmul": (["torch_libraries.py", "matmul"], "torch"),
    "torch_fp8": (["torch_libraries.py", "fp8"], "torch"),
    "torch_conv": (["torch_libraries.py", "conv"], "torch"),
    "torch_sdpa": (["torch_libraries.py", "sdpa"], "torch"),
    "jax": (["jax_matmul.py"], "jax"),
}


def _audit_example(name: str, report: Path, *options: str) -> dict:
    """`drvtma audit` of one example program (skipped where its library is missing): its audit.json."""
    program, needs = CASES[name]
    if isinstance(needs, tuple):
        skip_unless(*needs)  # the GEMM needs sm_90a: a portable (compute_90) build has no wgmma
    elif needs:
        pytest.importorskip(needs, reason=f"{needs} is not installed")
    done = subprocess.run([sys.executable, "-m", "drvtma", "audit", "--report", str(report), *options, "--",
                           sys.executable, str(EXAMPLES / program[0]), *program[1:]],
                          capture_output=True, text=True, timeout=240, cwd=ROOT,
                          # JAX takes 75% of the GPU up front by default; the suite's other workers share this GPU
                          env=dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false"))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((report / "audit.json").read_text())


@pytest.mark.parametrize("name", ["jax", "torch_matmul", "torch_fp8", "torch_conv", "torch_sdpa"])
def test_where_the_libraries_keep_their_maps(name, tmp_path):
    """--follow-pointers over the libraries whose maps no launch carries by value (XLA's, cuBLAS's, cuDNN's): the
    program runs as it does without it, and the figure lines say what was found in global memory behind their
    kernels' pointers. A map found there that an encode call wrote agrees with it."""
    data = _audit_example(name, tmp_path / name, "--follow-pointers")
    assert not data["capture_errors"], data["capture_errors"][:3]
    for row in data["libraries"]:
        record_figure({"test": "audit_behind_pointers", "program": name, **{k: row[k] for k in (
            "library", "encodes", "launch_maps", "maps_behind_pointers", "launches")}})
    behind = [m for m in data["maps"] if any(u["via"] == "pointer" for u in m["launched_by"])]
    for m in behind[:4]:
        u = next(u for u in m["launched_by"] if u["via"] == "pointer")
        record_figure({"test": "audit_map_behind_pointer", "program": name, "spec": (m["spec"] or "").splitlines()[:3],
                       "encoded": len(m["encoded_by"]), "kernel": (u["kernel"] or "")[:60], "parameter": u["parameter"],
                       "delta": u["delta"], "launches": u["launches"]})
    assert all(m["agrees_with_encode"] for m in behind if m["encoded_by"]), [m["spec"] for m in behind]
    notes = sorted({x["behind_note"] for x in data["launches"] if x["behind_note"]})
    if notes:
        record_figure({"test": "audit_behind_notes", "program": name, "notes": notes[:5]})


@pytest.mark.parametrize("name", list(CASES))
def test_the_command_line_audits_each_library(name, tmp_path):
    report = tmp_path / name
    data = _audit_example(name, report, "--pictures")
    assert not data["capture_errors"], data["capture_errors"][:3]
    for row in data["libraries"]:
        record_figure({"test": "audit", "program": name, **{k: row[k] for k in (
            "library", "encodes", "launch_maps", "decoded", "agree", "rules_broken", "launches", "unreadable")}})
    maps = data["maps"]
    # what each library built, for docs/audit.md: the first maps' specs and how their kernels took them
    for m in maps[:6]:
        record_figure({"test": "audit_map", "program": name, "libraries": m["libraries"], "mode": m["mode"],
                       "spec": (m["spec"] or "").splitlines()[:3], "encoded": len(m["encoded_by"]),
                       "launched": [{"kernel": (u["kernel"] or "")[:60], "parameter": u["parameter"], "offset": u["offset"],
                                     "launches": u["launches"]} for u in m["launched_by"][:2]],
                       "hints": m["hints"][:3], "rules_broken": [r["rule"] for r in m["rules_broken"]]})
    # where no map is in the arguments: does the kernel issue TMA at all, and edit maps in global memory?
    for x in [x for x in data["launches"] if not x["maps"] and x["library"] not in ("python",)][:8]:
        record_figure({"test": "audit_kernel_tma", "program": name, "library": x["library"],
                       "kernel": (x["kernel"] or "")[:60], "launches": x["launches"],
                       "argument_bytes": x["argument_bytes"], "tma_instructions": x["tma_instructions"],
                       "near_maps": x["near_maps"][:4]})
    if name in ("drvtma", "triton"):  # their kernels take maps by value and load through them
        tma = [x["tma_instructions"] for x in data["launches"] if x["maps"]]
        assert tma and all(isinstance(t, list) and any(op.startswith("UTMALDG") for op in t) for t in tma), tma
    for x in data["launches"][:4]:
        if x["unreadable"]:
            record_figure({"test": "audit_unreadable", "program": name, "kernel": (x["kernel"] or "")[:60],
                           "launches": x["launches"], "why": x["unreadable"]})
    # every map seen both ways (encoded and launched) decodes to its encode call's arguments
    both = [m for m in maps if m["encoded_by"] and m["launched_by"]]
    assert all(m["agrees_with_encode"] for m in both), [m["spec"] for m in both if not m["agrees_with_encode"]]
    if name in ("drvtma", "triton"):
        assert len(both) >= 2, data["libraries"]
    # every launch is accounted for: its maps, no map, or why it could not be read
    assert sum(x["launches"] for x in data["launches"]) == sum(r["launches"] for r in data["libraries"])
    for x in data["launches"]:
        assert x["argument_bytes"] is not None or x["unreadable"], x


@pytest.mark.timing
def test_the_audits_own_cost(tmp_path):
    """The same program (3,000 encodes, 3,000 launches, a torch training loop) plain and audited, one run."""
    program = [sys.executable, str(EXAMPLES / "overhead.py"), "3000"]
    ran = subprocess.run(program, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr[-2000:]
    plain = json.loads(ran.stdout.strip().splitlines()[-1])
    done = subprocess.run([sys.executable, "-m", "drvtma", "audit", "--report", str(tmp_path / "r"), "--", *program],
                          capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    audited = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    figure = {"test": "audit_overhead", "n": plain["n"]}
    for key in ("encode_s", "launch_s", "torch_loop_s"):
        if key in plain and key in audited:
            figure[key.replace("_s", "_ratio")] = round(audited[key] / plain[key], 2)
            figure[key] = round(plain[key], 4)
    record_figure(figure)
    data = json.loads((tmp_path / "r" / "audit.json").read_text())
    launches = sum(x["launches"] for x in data["launches"] if x["kernel"] == "map_args")
    assert launches == plain["n"] and sum(r["encodes"] for r in data["libraries"]) >= plain["n"]
