"""Your own kernel files and binaries built elsewhere, on the CPU: names from the current directory, -I headers,
the cache keyed on them, cubins / fatbins / PTX read for their layouts, maps from anywhere explained."""

import subprocess
import sys

import numpy as np
import pytest

from drvtma.cli.main import main
from drvtma.errors import ArgumentError, NvrtcError
from drvtma.runtime import compiler, cubin, images
from drvtma.runtime.compiler import compile_cubin
from drvtma.runtime.sass import instructions
from drvtma.tma.maps.findings import explain
from drvtma.tma.tiled import decode as D
from drvtma.tma.tiled.spec import TensorMapSpec

from support.byo_builds import KERNELS, nvcc_build


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRVTMA_CACHE_DIR", str(tmp_path / "cache"))
    compiler.clear_memory_cache()
    yield tmp_path / "cache"
    compiler.clear_memory_cache()


@pytest.fixture
def my_project(tmp_path, monkeypatch):
    """A copy of row_copy.cu, its header and include/ in a folder of their own, made the current directory."""
    import shutil

    shutil.copytree(KERNELS, tmp_path / "proj")
    monkeypatch.chdir(tmp_path / "proj")
    return tmp_path / "proj"


def test_my_kernel_file_compiles_by_its_relative_name(my_project):
    cubin = compile_cubin("row_copy.cu", include_dirs=["include"])  # ./row_copy.cu, then drvtma's cu/
    assert instructions(cubin, "row_copy")["UTMALDG.2D"] == 1


def test_a_script_next_to_the_kernel_finds_it(my_project, fresh_cache):
    (my_project / "build.py").write_text(
        "from drvtma.runtime.compiler import compile_cubin\n"
        "print(len(compile_cubin('row_copy.cu', include_dirs=['include'], options=['-lineinfo'])))\n")
    import os

    env = dict(os.environ, PYTHONPATH=str(compiler.cu_dir().parent))
    out = subprocess.run([sys.executable, "build.py"], cwd=my_project, env=env, capture_output=True, text=True)
    assert out.returncode == 0 and int(out.stdout) > 1000, out.stderr


def test_the_own_file_wins_over_a_kernel_of_the_same_name_in_cu(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert compiler.find_source("pipelines.cu") == compiler.cu_dir() / "b08" / "pipelines.cu"
    (tmp_path / "pipelines.cu").write_text('extern "C" __global__ void mine() {}\n')
    assert compiler.find_source("pipelines.cu") == tmp_path / "pipelines.cu"
    (tmp_path / "b08").mkdir()
    (tmp_path / "b08" / "pipelines.cu").write_text("")
    assert compiler.find_source("b08/pipelines.cu") == tmp_path / "b08" / "pipelines.cu"


def test_a_bare_kernel_name_without_its_suffix_is_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert compiler.find_source("load_probe") == compiler.cu_dir() / "tma" / "load_probe.cu"
    assert main(["compile", "load_probe"]) == 0


def test_editing_an_included_header_recompiles(my_project, fresh_cache):
    first = compile_cubin("row_copy.cu", include_dirs=["include"])
    assert compile_cubin("row_copy.cu", include_dirs=["include"]) is first  # memory hit
    config = my_project / "include" / "my_project" / "config.cuh"
    config.write_text("#pragma once\n#define MY_COPY_STRIDE 32u\n")
    second = compile_cubin("row_copy.cu", include_dirs=["include"])
    (my_project / "copy_out.cuh").write_text((my_project / "copy_out.cuh").read_text() + "\n// edited\n")
    compile_cubin("row_copy.cu", include_dirs=["include"])  # a comment in a nested header: a new key, a new entry
    assert len(list(fresh_cache.glob("*.cubin"))) == 3
    assert first != second


def test_user_headers_are_followed_through_includes(tmp_path):
    (tmp_path / "a.cuh").write_text('#include "sub/b.cuh"\n#include <drvtma/tma.cuh>\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.cuh").write_text("#include <c.cuh>\n")
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "c.cuh").write_text("#define C 1\n")
    from drvtma.runtime import includes

    found = includes.user_headers(b'#include "a.cuh"\n', tmp_path, (inc,))
    assert found == [tmp_path / "a.cuh", tmp_path / "sub" / "b.cuh", inc / "c.cuh"]


def test_missing_user_header_and_bad_option_name_the_log(my_project, fresh_cache):
    with pytest.raises(NvrtcError) as info:
        compile_cubin("row_copy.cu")  # no -I include: my_project/config.cuh is not found
    assert "my_project/config.cuh" in info.value.log
    with pytest.raises(NvrtcError) as info:
        compile_cubin("row_copy.cu", include_dirs=["include"], options=["--no-such-option"])
    assert "--no-such-option" in info.value.log and "--no-such-option" in str(info.value)
    with pytest.raises(ArgumentError, match="include_dirs"):
        compile_cubin("row_copy.cu", include_dirs=["no_such_folder"])


def test_compile_command_takes_include_dirs_and_options(my_project, capsys):
    assert main(["compile", "row_copy.cu", "-I", "include", "-X=-lineinfo"]) == 0
    assert "row_copy: parameters 128 B" in capsys.readouterr().out
    assert main(["compile", "row_copy.cu"]) == 1  # the header is not found without -I
    assert "config.cuh" in capsys.readouterr().err


# ---- binaries built elsewhere

def test_image_kinds_by_their_first_bytes():
    assert images.image_kind(b"\x7fELF\x02") == "cubin"
    assert images.image_kind((0xBA55ED50).to_bytes(4, "little") + b"\0" * 12) == "fatbin"
    assert images.image_kind(b"//\n// Generated by NVIDIA NVVM Compiler\n\n.version 8.8\n.target sm_90a\n") == "ptx"
    assert images.image_kind(b".version 8.8\n") == "ptx"
    assert images.image_kind(b"// a kernel\n#include <cuda.h>\n") is None
    assert images.read_image("extern \"C\" __global__ void k() {}\n") is None


def test_declared_layouts_align_as_nvcc_does():
    assert images.declared_layout({"k": [8, 128, 1]}) == {"k": [(0, 8), (128, 128), (256, 1)]}
    assert images.declared_layout({"k": [(0, 4), (8, 8)]}) == {"k": [(0, 4), (8, 8)]}
    for bad in ([4], {"k": 4}, {"k": [0]}, {"k": ["8"]}, {3: [8]}):
        with pytest.raises(ArgumentError, match="params"):
            images.declared_layout(bad)


def test_an_nvcc_cubin_shows_its_kernel_layout_and_tma(tmp_path, capsys):
    built = nvcc_build(KERNELS / "nvcc_tile_copy.cu", tmp_path / "nvcc_tile_copy.cubin")
    data = built.read_bytes()
    assert images.image_kind(data) == "cubin"
    layout = cubin.kernel_params(data, "nvcc_tile_copy")
    assert [s for _, s in layout] == [128, 8, 4, 8]  # CUtensorMap by value, coords, box_bytes, out
    assert instructions(data, "nvcc_tile_copy")["UTMALDG.2D"] == 1
    assert main(["compile", "--inspect", str(built)]) == 0
    out = capsys.readouterr().out
    assert "nvcc_tile_copy: parameters 128 B" in out and "UTMALDG.2D" in out and "SYNCS.ARRIVE.TRANS64" in out


@pytest.mark.parametrize("kind", ["fatbin", "ptx"])
def test_fatbins_and_ptx_give_the_same_sizes_as_the_cubin(tmp_path, kind, capsys):
    source = KERNELS / "nvcc_tile_copy.cu"
    want = cubin.kernel_params(nvcc_build(source, tmp_path / "k.cubin").read_bytes(), "nvcc_tile_copy")
    data = nvcc_build(source, tmp_path / f"k.{kind}", kind).read_bytes()
    got = images.image_params(kind, data, "nvcc_tile_copy")
    assert [s for _, s in got] == [s for _, s in want]
    if kind == "fatbin":
        assert got == want  # the fatbin's own cubin, read in place
    assert images.image_params(kind, data, "no_such_kernel") is None
    assert main(["compile", "--inspect", str(tmp_path / f"k.{kind}")]) == 0
    out = capsys.readouterr().out
    assert "cp.async.bulk.tensor.2d" in out if kind == "ptx" else "UTMALDG.2D" in out


def test_compressed_fatbins_say_so_in_one_line(tmp_path):
    fat = bytearray(nvcc_build(KERNELS / "nvcc_tile_copy.cu", tmp_path / "k.fatbin", "fatbin").read_bytes())
    for pos in range(len(fat) - 4):  # what zstd-compressed entries look like to a reader: not ELF, not PTX
        if fat[pos:pos + 4] == b"\x7fELF" or fat[pos:pos + 8] == b".version":
            fat[pos] = 0x28
    with pytest.raises(ValueError, match="compressed"):
        images.image_params("fatbin", bytes(fat), "nvcc_tile_copy")


# ---- maps from anywhere, explained

SPEC = TensorMapSpec.create("float32", (64, 64), (16, 32), strides_bytes=(512, 4), base_address=1 << 20)


def _with_bit85(spec) -> bytes:
    raw = bytearray(D.encode_bytes(spec))
    raw[10] |= 0x20  # bit 85: qword 1 bit 21
    return bytes(raw)


def test_bit85_is_a_named_finding_not_an_error(tmp_path, capsys):
    report = explain(_with_bit85(SPEC))
    assert report.broken == [] and [f.name for f in report.findings] == ["oob_address_generation_bit85"]
    assert "This map is such a tensor" in report.findings[0].summary  # non-dense, under 128 KiB
    dense = TensorMapSpec.create("float32", (256, 256), (16, 32), base_address=1 << 20)
    assert "not such a tensor" in explain(_with_bit85(dense)).findings[0].summary
    assert explain(D.encode_bytes(SPEC)).findings == []
    (tmp_path / "map.bin").write_bytes(_with_bit85(SPEC))
    assert main(["decode", str(tmp_path / "map.bin")]) == 0
    assert "oob_address_generation_bit85" in capsys.readouterr().out
    assert main(["check", "--map", _with_bit85(SPEC).hex()]) == 0
    assert "oob_address_generation_bit85" in capsys.readouterr().out


def test_broken_rules_come_with_fixes_from_raw_bytes(tmp_path, capsys):
    v = D.put(int.from_bytes(_with_bit85(SPEC), "little"), D.BOX_DIM[0], 3 - 1)  # 12-byte inner box
    raw = v.to_bytes(128, "little")
    report = explain(raw)
    assert [e.rule for e in report.broken] == ["box_inner_bytes"] and report.broken[0].fix
    assert {f.name for f in report.findings} == {"oob_address_generation_bit85", "derived_words_differ"}
    (tmp_path / "map.hex").write_text(raw.hex())
    assert main(["check", "--map", str(tmp_path / "map.hex")]) == 1
    captured = capsys.readouterr()
    assert "box_inner_bytes" in captured.out and "fix" in captured.out and "box_inner_bytes" in captured.err
    assert main(["check", "--map", raw.hex(), "--dtype", "f32"]) == 2


def test_buffers_of_128_bytes_from_numpy_and_friends():
    raw = _with_bit85(SPEC)
    words = np.frombuffer(raw, dtype=np.uint64)  # 16 words, as a framework holds a CUtensorMap
    for obj in (words, np.frombuffer(raw, dtype=np.int32), np.frombuffer(raw, dtype=np.uint8), list(raw)):
        assert D.map_bytes(obj) == raw

    class DeviceWords:  # CuPy's shape of a device array: the interface, and get() for a host copy
        __cuda_array_interface__ = {"shape": (16,), "typestr": "<u8", "data": (1 << 40, False), "version": 3}

        def get(self):
            return words

    assert explain(DeviceWords()).findings[0].name == "oob_address_generation_bit85"
    torch = pytest.importorskip("torch", reason="torch is not installed")
    assert D.map_bytes(torch.from_numpy(words.astype(np.int64))) == raw
