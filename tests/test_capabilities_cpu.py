"""The capability table (drvtma.runtime.capabilities) and the kernel families' build targets
(drvtma.runtime.families), on the CPU: fake H200, B200 and RTX 5090 device properties, the table checked against
what NVRTC's ptxas compiles per target, every family compiled for the targets it claims with its TMA instructions
in the SASS (nvdisasm), and the refusals that name their rule."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from drvtma.errors import ArgumentError, CapabilityError, NoGpuError
from drvtma.runtime import capabilities as caps
from drvtma.runtime import compiler, families, sass

H200 = SimpleNamespace(name="NVIDIA H200", compute_capability=(9, 0), sm_count=132, smem_per_block_optin=232448,
                       cluster_launch=True)
RTX5090 = SimpleNamespace(name="NVIDIA GeForce RTX 5090", compute_capability=(12, 0), sm_count=170,
                          smem_per_block_optin=101376, cluster_launch=True)
B200 = SimpleNamespace(name="NVIDIA B200", compute_capability=(10, 0), sm_count=148, smem_per_block_optin=232448,
                       cluster_launch=True)
CU = Path(compiler.cu_dir())


@pytest.fixture(autouse=True)
def _no_forced_arch(monkeypatch):
    monkeypatch.delenv("DRVTMA_ARCH", raising=False)


def test_the_h200_row_takes_the_devices_own_figures():
    row = caps.for_device(H200)
    assert row.target == "sm_90a" and row.sm_count == 132 and row.smem_per_block_optin == 232448
    assert {"tma", "clusters", "multicast", "wgmma", "setmaxnreg", "tensormap_replace"} <= row.features
    assert not row.has("tcgen05") and not row.has("subbyte_maps")
    odd = SimpleNamespace(**{**vars(H200), "smem_per_block_optin": 99 * 1024, "cluster_launch": False})
    row = caps.for_device(odd)  # the device's figures win over the table's
    assert row.smem_per_block_optin == 99 * 1024 and not row.has("multicast") and not row.has("clusters")


def test_an_rtx_5090_is_refused_wgmma_with_the_named_sentence():
    row = caps.for_device(RTX5090)
    assert row.smem_per_block_optin == 101376 and row.has("gather4") and not row.has("scatter4")
    with pytest.raises(CapabilityError) as info:
        caps.require("wgmma", row)
    assert info.value.rule == "needs_wgmma" and isinstance(info.value, NoGpuError)
    assert str(info.value) == ("wgmma needs sm_90a; this is sm_120 (NVIDIA GeForce RTX 5090): the GEMM and the wgmma "
                               "probe are unavailable")
    assert "multicast" in dict(row.caveats)  # legal there, its caveat printed with it


def test_build_targets_per_gpu():
    h200, b200, rtx = (caps.for_device(p) for p in (H200, B200, RTX5090))
    assert families.build_target("tma/load_probe.cu", h200) == "sm_90"  # portable: sm_90 SASS on a Hopper
    assert families.build_target("load_probe.cu", rtx) == "compute_90"  # PTX the driver JIT-compiles
    assert families.build_target(CU / "cluster" / "multicast_probe.cu", b200) == "compute_90"
    assert families.build_target("wgmma/wgmma_probe.cu", h200) == "sm_90a"
    assert families.build_target("tma/global_map.cu", rtx) == "sm_120a"  # tensormap.replace: the arch's own target
    assert families.build_target("extern \"C\" __global__ void k() {}\n", rtx) == "sm_120a"  # a user's kernel
    for source, row in (("gemm/gemm_ws.cu", b200), ("wgmma/wgmma_probe.cu", rtx)):
        with pytest.raises(CapabilityError) as info:
            families.build_target(source, row)
        assert info.value.rule == "needs_wgmma"


def test_a_users_file_named_like_a_family_is_the_users(tmp_path, monkeypatch):
    (tmp_path / "tma").mkdir()
    for name in ("pipelines.cu", "tma/load_probe.cu"):
        (tmp_path / name).write_text('extern "C" __global__ void k() {}\n')
    monkeypatch.chdir(tmp_path)
    h200 = caps.for_device(H200)
    for source in ("pipelines.cu", "tma/load_probe.cu", str(tmp_path / "tma" / "load_probe.cu")):
        assert families.family_of(source) is None
        assert families.build_target(source, h200) == "sm_90a"  # its needs are unknown: the arch's own target


def test_drvtma_arch_forces_a_target_and_refuses_what_it_cannot_build(monkeypatch):
    h200 = caps.for_device(H200)
    monkeypatch.setenv("DRVTMA_ARCH", "compute_90")
    assert families.build_target("tma/store_probe.cu", h200) == "compute_90"
    with pytest.raises(CapabilityError) as info:
        families.build_target("wgmma/wgmma_probe.cu", h200)
    assert "the build target is compute_90" in str(info.value) and info.value.rule == "needs_wgmma"
    with pytest.raises(CapabilityError, match="tensormap_replace needs sm_90a or sm_100a"):
        families.build_target("tma/global_map.cu", h200)
    monkeypatch.setenv("DRVTMA_ARCH", "sm_x")
    with pytest.raises(ArgumentError):
        families.build_target("tma/load_probe.cu", h200)


def test_every_kernel_in_cu_is_a_declared_family():
    found = {str(p.relative_to(CU)) for p in CU.glob("*/*.cu") if p.parent.name != "include"}
    assert found == set(families.FAMILIES)


def test_the_compile_cache_keys_on_the_target():
    keys = {compiler.cache_key(b"k", "k.cu", compiler.build_options(t)) for t in ("sm_90a", "sm_90", "compute_90")}
    assert len(keys) == 3


# One instruction per feature: the table must say a target has it exactly when NVRTC's ptxas compiles it there.
SNIPPETS = {
    "wgmma": 'asm volatile("wgmma.fence.sync.aligned;");',
    "setmaxnreg": 'asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");',
    "tensormap_replace": 'asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" '
                         ':: "r"(0), "l"(p));',
    "tcgen05": 'asm volatile("tcgen05.fence::before_thread_sync;");',
    "multicast": 'asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes'
                 '.multicast::cluster [%0], [%1, {%2}], [%3], %4;" :: "r"(0), "l"(p), "r"(0), "r"(0), '
                 '"h"((unsigned short)3) : "memory");',
    "gather4": 'asm volatile("cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes '
               '[%0], [%1, {%2, %3, %4, %5, %6}], [%7];" :: "r"(0), "l"(p), "r"(0), "r"(0), "r"(1), "r"(2), '
               '"r"(3), "r"(0) : "memory");',
    "scatter4": 'asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group '
                '[%0, {%1, %2, %3, %4, %5}], [%6];" :: "l"(p), "r"(0), "r"(0), "r"(1), "r"(2), "r"(3), "r"(0) '
                ': "memory");',
}


def _compiles(body: str, target: str) -> bool:
    src = 'extern "C" __global__ void k(const void* p) { %s }\n' % body
    try:
        compiler.compile_cubin(src, name="feature.cu", arch=target)
    except Exception:
        return False
    return True


@pytest.mark.parametrize("target", ["sm_90", "sm_90a", "sm_100a", "sm_103a", "sm_120a"])
def test_the_table_agrees_with_ptxas(target):
    offered = caps.target_features(target)
    disagree = {f: f in offered for f, body in SNIPPETS.items() if _compiles(body, target) != (f in offered)}
    assert not disagree, f"{target}: the table says {disagree}, ptxas the opposite"


# Hopper in the default run; every family built again per Blackwell target is `-m slow`
@pytest.mark.parametrize("target", ["sm_90", pytest.param("sm_100a", marks=pytest.mark.slow),
                                    pytest.param("sm_120a", marks=pytest.mark.slow)])
def test_each_family_builds_for_the_targets_it_claims_with_its_tma_instructions(target):
    """SASS on every target a family's needs allow (the portable ones everywhere), holding the TMA instructions
    the family claims; a family that cannot be built there refuses by its rule."""
    offered = caps.target_features(target)
    built = []
    for path, family in families.FAMILIES.items():
        if not family.needs <= offered:
            continue
        ops = {op.split(".")[0] for op in sass.instructions(compiler.compile_cubin(path, arch=target))}
        missing = set(family.sass) - ops
        assert not missing, f"{path} for {target}: no {sorted(missing)} in its SASS"
        built.append(path)
    portable = [p for p, f in families.FAMILIES.items() if f.portable]
    assert set(portable) <= set(built)


def test_portable_families_compile_to_compute_90_ptx():
    for path, family in families.FAMILIES.items():
        if family.portable:
            ptx = compiler.compile_cubin(path, arch="compute_90")
            assert b".target sm_90" in ptx and not ptx.startswith(b"\x7fELF"), path


def test_wgmma_families_refuse_other_targets_by_rule(monkeypatch):
    for target in ("sm_100a", "sm_120a", "compute_90"):
        monkeypatch.setenv("DRVTMA_ARCH", target)
        for path in ("wgmma/wgmma_probe.cu", "gemm/gemm_ws.cu"):
            with pytest.raises(CapabilityError) as info:
                families.build_target(path, caps.HOPPER)
            assert info.value.rule == "needs_wgmma" and f"the build target is {target}" in str(info.value)


def test_info_prints_a_targets_row_without_a_gpu(capsys):
    from drvtma.cli.main import main

    assert main(["info", "--target", "sm_120a"]) == 0
    out = capsys.readouterr().out
    assert "sm_120a" in out and "wgmma" in out and "no: wgmma" in out and "101376 B" in out
    assert main(["info", "--table"]) == 0
    assert caps.markdown() == capsys.readouterr().out


def test_unknown_and_older_gpus():
    assert caps.for_cc((8, 0)).features == frozenset()
    with pytest.raises(CapabilityError, match="tma needs sm_90 or newer; this is sm_80"):
        caps.require("tma", caps.for_cc((8, 0), device="A100"))
    assert caps.for_cc((13, 0)).features == caps.GENERIC_FEATURES  # a GPU after the table: the portable build
    with pytest.raises(ArgumentError):
        caps.require("warp_magic", caps.HOPPER)


def test_the_plugin_skips_by_capability_with_the_sentence(monkeypatch):
    from drvtma.runtime import driver
    from drvtma.testing import plugin

    monkeypatch.setattr(driver, "device_capabilities", lambda: caps.for_device(RTX5090))
    with pytest.raises(pytest.skip.Exception, match="wgmma needs sm_90a; this is sm_120"):
        plugin.skip_unless("tma", "wgmma")
    plugin.skip_unless("tma", "multicast")
    monkeypatch.setattr(driver, "device_capabilities", lambda: caps.for_device(H200))
    monkeypatch.setenv("DRVTMA_ARCH", "compute_90")
    with pytest.raises(pytest.skip.Exception, match="the build target is compute_90"):
        plugin.skip_unless("wgmma")


NEEDS_CONFTEST = '''
from types import SimpleNamespace

from drvtma.runtime import capabilities, driver
from drvtma.testing import plugin

RTX = SimpleNamespace(name="NVIDIA GeForce RTX 5090", compute_capability=(12, 0), sm_count=170,
                      smem_per_block_optin=101376, cluster_launch=True)
plugin.tma_context = lambda: None
driver.device_capabilities = lambda: capabilities.for_device(RTX)
'''
NEEDS_TESTS = '''
import pytest


@pytest.fixture(scope="module")
def wgmma_kernel():
    raise RuntimeError("a module fixture ran before the skip")


@pytest.mark.needs("wgmma")
def test_wgmma(wgmma_kernel):
    pass


@pytest.mark.needs("multicast", "tma")
def test_multicast():
    pass
'''


def test_the_needs_marker_skips_before_any_fixture_with_the_rule(tmp_path):
    import subprocess
    import sys

    from drvtma.testing.children import child_env

    (tmp_path / "conftest.py").write_text(NEEDS_CONFTEST)
    (tmp_path / "test_needs.py").write_text(NEEDS_TESTS)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                           "drvtma.testing.plugin", "-rs", str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env=child_env(), timeout=120)
    assert "1 passed, 1 skipped" in proc.stdout, proc.stdout + proc.stderr
    assert "wgmma needs sm_90a; this is sm_120 (NVIDIA GeForce RTX 5090)" in proc.stdout


def test_the_readme_shows_the_table():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert caps.markdown() in readme and "## Where drvtma runs" in readme
