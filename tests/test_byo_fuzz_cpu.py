"""Fuzz your own kernel, on the CPU: NumPy "user kernels" (tests/support/byo_kernels.py) through the contract of
drvtma.fuzz.kernel. The right ones pass with 0 mismatches; each planted bug is found, shrunk to a small case,
written as a reproducer, and `drvtma repro` replays it with the same diff."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from drvtma.cli.main import main
from drvtma.errors import ArgumentError
from drvtma.fuzz.kernel import LoadKernel, StoreKernel, batched, load_kernel
from drvtma.fuzz.user import KERNEL_LOADS, KernelMismatch, fuzz_kernel
from drvtma.tma.tiled.spec import TensorMapSpec

from support import byo_kernels as B

KERNELS = Path(B.__file__).resolve()


@pytest.mark.parametrize("run, direction", [(B.load_images, "loads"), (B.load_boxes, "loads"),
                                            (B.store, "stores"), (B.store, "reductions")])
def test_a_right_kernel_passes_with_no_mismatch(run, direction):
    result, paths = fuzz_kernel(run, direction=direction, examples=120, seed=3)
    assert result.cases == 120 and result.mismatches == 0 and paths == []
    assert result.size >= 120 and len({k for k in result.by_label if k.startswith("rank=")}) >= 3


def test_the_callables_meet_the_protocols():
    assert isinstance(B.load_images, LoadKernel) and isinstance(B.store, StoreKernel)


def _shrunk(out: Path, name: str) -> tuple[Path, dict]:
    files = sorted(out.glob(f"repro-{name}-*.json"))
    assert files
    path = files[0]
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("bug, direction, small", [("off_by_one", "loads", 64), ("no_swizzle", "loads", 1024),
                                                   ("store_skips_last_chunk", "stores", 64),
                                                   ("off_by_one_batched", "loads", 64),
                                                   ("store_skips_last_chunk_batched", "stores", 64)])
def test_a_planted_bug_is_found_shrunk_and_replayed(bug, direction, small, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the kernel is named by a path relative to here, as a user would
    (tmp_path / "kernels.py").write_text(KERNELS.read_text())
    out = tmp_path / "out"
    rc = main(["fuzz", direction, "--kernel", f"kernels.py:{bug}", "--examples", "48", "--seed", "4", "--quiet",
               "--no-db", "--max-shrinks", "1", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 1 and "mismatch" in text, text
    target = f"kernel-{direction}"
    path, repro = _shrunk(out, target)
    assert repro["shrunk"] and repro["options"]["kernel"] == f"{tmp_path / 'kernels.py'}:{bug}"
    spec = TensorMapSpec.from_dict(repro["case"]["spec"])
    # one shrink pass: small, though the rank it stops at depends on hypothesis' version (3 on the GPU image's)
    assert spec.smem_bytes <= small and spec.rank <= 3, repro["describe"]
    if direction == "loads":
        assert len(repro["case"]["coordinates"]) == 1  # one box
        svg = path.with_suffix(".svg")  # the failure's picture, as drvtma's own loads target draws it
        assert repro.get("picture") == svg.name and "differs (expected != got)" in svg.read_text()
    first = repro["result"]["first_differences"][0]
    assert first["expected"] != first["got"] and "where" in first
    monkeypatch.chdir(Path(__file__).parent)  # the reproducer names the kernel by its absolute path
    assert main(["repro", str(path)]) == 1
    assert "same diff as recorded" in capsys.readouterr().out


@pytest.mark.parametrize("replay", [True, False], ids=["replay-and-shrink", "search-and-shrink"])
def test_a_failure_shrinks_to_the_same_case_whatever_ran_before(replay, monkeypatch):
    # hypothesis' own random carries over within a process; the shrink (its case and its steps) must not depend on it
    from hypothesis import find
    from hypothesis import strategies as st

    import drvtma.fuzz.shrink as shrink

    if not replay:  # as on a hypothesis without the choice-sequence database: a seeded search instead
        monkeypatch.setattr(shrink, "hypothesis_choices_to_bytes", lambda: None)
    shrunk = []
    for warm_up in (0, 3):
        for _ in range(warm_up):
            find(st.lists(st.integers()), lambda x: sum(x) > 10**6)
        result, _ = fuzz_kernel(B.no_swizzle, examples=48, seed=4, check=False)
        failure = result.failures[0]
        shrunk.append((KERNEL_LOADS.case_to_json(failure.shrunk_case), failure.shrink["calls"]))
    assert result.mismatches and shrunk[0] == shrunk[1]


def test_fuzz_kernel_raises_with_the_shrunk_case_and_writes_the_reproducer(tmp_path):
    with pytest.raises(KernelMismatch) as info:
        fuzz_kernel(B.store_skips_last_chunk, direction="stores", examples=30, seed=1, out=tmp_path)
    text = str(info.value)
    assert isinstance(info.value, AssertionError)
    assert "the smallest failing case found" in text and "first differences" in text and "drvtma repro" in text
    assert sorted(tmp_path.glob("repro-kernel-stores-*.json"))


def test_a_wrong_return_is_named():
    with pytest.raises(ArgumentError, match="the kernel's return value.*shape"):
        fuzz_kernel(B.wrong_shape, examples=2, shrink=False)
    with pytest.raises(ArgumentError, match="return all of memory"):
        fuzz_kernel(lambda memory, base, spec, coords, box, op: memory[:16], direction="stores", examples=1)
    with pytest.raises(ArgumentError, match="direction"):
        fuzz_kernel(B.store, direction="sideways")


def test_kernel_references(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text("def run(memory, base, spec, coords):\n    return None\n")
    assert load_kernel("k.py:run")(None, 0, None, None) is None
    for ref, why in [("k.py", "file.py:name"), ("nope.py:run", "no file"), ("k.py:other", "no callable"),
                     ("no_such_module_xyz:run", "no module"), ("<python>:f", "unnamed")]:
        with pytest.raises(ArgumentError, match=why):
            load_kernel(ref)


def test_data_is_never_zero_and_guards_are_poison():
    from drvtma.fuzz.kernel import GUARD_BYTES, load_memory

    spec = TensorMapSpec.create("uint8", (64, 64), (8, 16))
    memory = load_memory(spec, 0)
    tensor = memory[GUARD_BYTES:GUARD_BYTES + spec.extent_bytes]
    assert memory.size == 2 * GUARD_BYTES + 4096 and (tensor != 0).all()
    assert len(np.unique(memory[:GUARD_BYTES])) > 100


def test_the_runners_kernel_compiles_to_tensor_loads():
    from drvtma.runtime.compiler import compile_cubin
    from drvtma.runtime.sass import instructions

    ops = instructions(compile_cubin(KERNELS.with_name("byo_image_load.cu")), "image_load")
    assert {f"UTMALDG.{r}D" for r in range(1, 6)} <= set(ops), sorted(ops)


# ---- what bounds a campaign of your kernel: each part timed, the largest named

def _slow(run, seconds: float):
    def slow(*args):
        time.sleep(seconds)
        return run(*args)
    return slow


@pytest.mark.parametrize("direction, run", [("loads", B.load_images), ("stores", B.store)])
def test_bound_by_names_a_slow_kernel(direction, run):
    from drvtma.fuzz.campaign import bound_by
    from drvtma.fuzz.user import KERNEL_PHASE

    result, _ = fuzz_kernel(_slow(run, 0.02), direction=direction, examples=12, seed=2)
    assert bound_by(result.timing).startswith(KERNEL_PHASE), result.timing
    assert {"data", "oracle", "compare", KERNEL_PHASE} <= set(result.timing)


@pytest.mark.parametrize("direction, run", [("loads", B.load_images), ("stores", B.store)])
def test_a_triton_campaign_times_each_signatures_first_call_apart(direction, run):
    """Triton compiles on a kernel's first call with new constants: those calls are their own phase, so a campaign
    that pays compiles says so, and the later calls keep the callable's own pace."""
    from drvtma.fuzz.campaign import bound_by
    from drvtma.fuzz.triton import TRITON_SPECS
    from drvtma.fuzz.user import FIRST_CALL_PHASE, KERNEL_PHASE

    compiled = set()

    def compiling(*args):
        spec = args[0][0].spec if len(args) == 1 else args[2]
        if TRITON_SPECS.compile_signature(spec) not in compiled:
            compiled.add(TRITON_SPECS.compile_signature(spec))
            time.sleep(0.05)
        return run(*args)

    result, _ = fuzz_kernel(compiling, direction=direction, examples=24, seed=3, strategy="triton", signatures=3)
    assert len(compiled) <= 3 and bound_by(result.timing).startswith(FIRST_CALL_PHASE), result.timing
    assert result.timing[KERNEL_PHASE] < 0.05 * len(compiled) <= result.timing[FIRST_CALL_PHASE], result.timing
    drvtma_result, _ = fuzz_kernel(compiling, direction=direction, examples=12, seed=3)
    assert FIRST_CALL_PHASE not in drvtma_result.timing  # drvtma's strategy compiles nothing per call


def test_bound_by_names_a_slow_oracle(monkeypatch):
    from drvtma.fuzz import kernel as K
    from drvtma.fuzz.campaign import bound_by

    monkeypatch.setattr(K, "expected_boxes", _slow(K.expected_boxes, 0.02))
    result, _ = fuzz_kernel(B.load_images, direction="loads", examples=12, seed=2)
    assert bound_by(result.timing).startswith("oracle"), result.timing


@pytest.mark.parametrize("one, many, direction", [(B.load_images, B.load_images_batched, "loads"),
                                                  (B.store, B.store_batched, "stores"),
                                                  (B.store, B.store_batched, "reductions")])
def test_a_batched_kernel_sees_the_same_cases_once_per_batch(one, many, direction):
    """The batched protocol: one call per batch with the batch's calls; the same seed gives the same cases, counts
    and verdicts as the one-case protocol."""
    calls = []

    @batched
    def counting(batch):
        calls.append(len(batch))
        return many(batch)

    single, _ = fuzz_kernel(one, direction=direction, examples=40, seed=5)
    batch, _ = fuzz_kernel(counting, direction=direction, examples=40, seed=5)
    assert (batch.cases, batch.size, batch.mismatches, batch.by_label) == \
        (single.cases, single.size, single.mismatches, single.by_label) and batch.mismatches == 0
    assert sum(calls) == 40 and len(calls) < 40 and max(calls) > 1


def test_a_batched_kernel_that_returns_too_few_results_is_named():
    with pytest.raises(ArgumentError, match="list of 8 results"):
        fuzz_kernel(B.one_result_short, examples=8, shrink=False)
    with pytest.raises(ArgumentError, match="decorate a function"):
        batched([].append)  # a builtin method: nothing to mark
