"""Kernel parameter layouts read from the cubin (drvtma.runtime.cubin): the path that needs no failing driver call."""

import pytest

from drvtma.runtime import compiler, cubin

ECHO = [(0, 128), (128, 4), (136, 8), (144, 1), (152, 8), (160, 4), (164, 2), (168, 8)]


def test_scale_add_layout_is_its_signature():
    image = compiler.compile_cubin("runtime/core_roundtrip.cu")
    # (const float*, float*, int, float, float)
    assert cubin.kernel_params(image, "scale_add") == [(0, 8), (8, 8), (16, 4), (20, 4), (24, 4)]


def test_a_map_by_value_and_the_scalars_after_it():
    params = cubin.kernel_params(compiler.compile_cubin("runtime/core_roundtrip.cu"), "echo_args")
    base = params[0][0]  # the bank offset of the first parameter; only the layout matters
    assert [(o - base, s) for o, s in params] == ECHO


def test_ring_kernels_have_ten_parameters():
    image = compiler.compile_cubin("b08/pipelines.cu", defines={"B08_THREADS": 128})
    for kernel in ("pipe_ring", "ws_ring"):  # in, sums, 5 ints, status, trace, capacity
        assert [s for _, s in cubin.kernel_params(image, kernel)] == [8, 8, 4, 4, 4, 4, 4, 8, 8, 4]


def test_a_kernel_without_parameters_and_one_that_is_absent():
    src = 'extern "C" __global__ void nothing() {}\nextern "C" __global__ void one(int* p) { *p = 1; }\n'
    image = compiler.compile_cubin(src, name="params_probe.cu")
    assert cubin.kernel_params(image, "nothing") == []
    assert cubin.kernel_params(image, "one") == [(0, 8)]
    assert cubin.kernel_params(image, "missing") is None


def test_not_a_cubin_is_refused():
    with pytest.raises(ValueError, match="not an ELF64 cubin"):
        cubin.kernel_params(b"//\n.version 8.0\n", "k")


def test_a_compile_writes_into_its_own_buffers_only():
    """NVRTC once wrote its empty log's NUL into CPython's shared b" " (torch's import then failed)."""
    image = compiler._nvrtc_compile(b'extern "C" __global__ void k() {}', "quiet.cu", ("-arch=sm_90a",))
    assert image[:4] == b"\x7fELF"
    assert b" " == bytes([32]) and b" " * 3 == bytes([32, 32, 32])


def test_opcodes_keep_their_shape_suffix():
    """wgmma opcodes carry their shape in lower-case 'x's (HGMMA.64x256x16.F32): the opcode parser keeps it."""
    from drvtma.runtime import sass

    line = "        /*0a10*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT, gsb0 ;"
    assert sass._INSN.match(line).group(1) == "HGMMA.64x256x16.F32.BF16"
    assert sass._INSN.match("        /*0a20*/               @!P0 UTMALDG.2D [UR8], [UR4] ;").group(1) == "UTMALDG.2D"
