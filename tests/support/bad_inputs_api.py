"""Wrong inputs to drvtma's public Python API (see bad_inputs.py for what each case asserts).

Every case is refused before any driver call, so it ends the same way on a CPU-only machine and on a GPU one.
Fake arrays here are NumPy arrays or CUDA Array Interface dicts that are wrong on their face (checked before
cuda.core or the driver sees them).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

import drvtma
from drvtma import DeviceBuffer, TensorMapSpec, compile_cubin, encode_tiled, load_module
from drvtma.cluster import Multicast, check_multicast
from drvtma.errors import (
    ArgumentError,
    ClusterError,
    GemmError,
    LaunchError,
    TensorMapError,
    UnknownNameError,
    WgmmaError,
)
from drvtma.fuzz import Target, get_target, merge_results, register, run_campaign
from drvtma.gemm import GemmConfig
from drvtma.gemm.conv import Conv2d
from drvtma.runtime import capabilities
from drvtma.runtime.cluster_launch import check_cluster_shape
from drvtma.show import bank_report, cells, draw_image, overlay
from drvtma.show.failure import failure_svg
from drvtma.testing import RngChooser, break_rule, build_coordinates, build_valid_spec, special_float_bits
from drvtma.testing.failures import check_images
from drvtma.tma import stores as S
from drvtma.tma.im2col.encode import encode_im2col
from drvtma.tma.im2col.oracle import check_im2col_coordinates as im2col_coordinates
from drvtma.tma.im2col.rules import validate_im2col
from drvtma.tma.im2col.spec import Im2colSpec
from drvtma.tma.maps import replace as R
from drvtma.tma.tiled import decode as D
from drvtma.tma.tiled.oracle import check_load_coordinates
from drvtma.wgmma import (
    SmemDescriptor,
    check_descriptor,
    check_operands,
    check_shape,
    descriptor_for,
    from_tma_swizzle,
    spec_for_tile,
    to_tma_swizzle,
    wgmma_type,
)

from .bad_inputs import ApiCase

ADDR = 0x7F00_0000_0000


def spec(**changes) -> TensorMapSpec:
    """A valid 64 x 64 float16 map with an address (each case changes one thing)."""
    return TensorMapSpec.create("float16", (64, 64), (64, 64), base_address=ADDR).replace(**changes)


def wgmma_spec() -> TensorMapSpec:
    return TensorMapSpec.create("float16", (64, 64), (64, 64), swizzle=3)


def create(**kw):
    args = {"dtype": "float16", "shape": (64, 64), "box": (64, 64), **kw}
    dtype, shape, box = args.pop("dtype"), args.pop("shape"), args.pop("box")
    return lambda: TensorMapSpec.create(dtype, shape, box, **args).validate()


def from_dict(d):
    return lambda: TensorMapSpec.from_dict(d).validate()


def cai(**fields):
    """A CUDA Array Interface exporter whose dict has these fields over a well-formed one."""
    d = {"shape": (64, 64), "typestr": "<f2", "data": (ADDR, False), "version": 3, "strides": None}
    d.update(fields)
    return SimpleNamespace(__cuda_array_interface__={k: v for k, v in d.items() if v is not ...})


def rng():
    return RngChooser(np.random.default_rng(0))


def im2col(**changes) -> Im2colSpec:
    fields = dict(dtype="float16", shape=(2, 8, 8, 16), lower_corner=(-1, -1), upper_corner=(-1, -1),
                  channels_per_pixel=16, pixels_per_column=8)
    fields.update(changes)
    return Im2colSpec.create(**fields)


class _Named(Target):
    name = "bad-inputs-demo"


def _campaign(**kw):
    args = {"target": _Named(), "options": {}, "examples": 10, **kw}
    target, options = args.pop("target"), args.pop("options")
    return lambda: run_campaign(target, options, fake=True, shrink=False, **args)


T, W, G, C, A = TensorMapError, WgmmaError, GemmError, ClusterError, ArgumentError

def _fuzz_kernel(run, **kw):
    from drvtma.fuzz.user import fuzz_kernel

    return fuzz_kernel(run, **kw)


def _store_runner(name="image_store", source="tests/support/byo_image_store.cu"):
    from drvtma.fuzz.runners import CuStoreRunner

    return CuStoreRunner(source, name)


def _cuda_core_runner(source, name="image_load"):
    from drvtma.fuzz.cuda_core import CudaCoreLoadRunner

    return CudaCoreLoadRunner(source, name)


def _cuda_core_store(spec_, op="store"):
    """cuda.core's store runner on a case it refuses on the host (before it compiles its kernel)."""
    from drvtma.fuzz.cuda_core import CudaCoreStoreRunner

    memory, base, _, coords, _, _ = _store_case()
    box = np.zeros((4, 8), spec_.dtype.numpy)
    return CudaCoreStoreRunner("tests/support/byo_image_store.cu", "image_store")(memory, base, spec_, coords, box, op)


def _store_case(coords=(1, 16), op="store", box=None, base=512):
    """A store case the runner refuses on the host (before it loads its kernel): one argument wrong."""
    spec_ = TensorMapSpec.create("uint32", (10, 40), (4, 8))
    box = np.zeros((4, 8), np.uint32) if box is None else box
    return np.zeros(1024 + spec_.extent_bytes, np.uint8), base, spec_, np.array(coords), box, op


def _load_kernel(ref):
    from drvtma.fuzz.kernel import load_kernel

    return load_kernel(ref)


CASES: list[ApiCase] = [
    # ---- TensorMapSpec.create: types
    ApiCase("create-dtype-none", create(dtype=None), T, ("dtype",)),
    ApiCase("create-dtype-unknown", create(dtype="float17"), T, ("dtype",)),
    ApiCase("create-dtype-float", create(dtype=1.5), T, ("dtype",)),
    ApiCase("create-dtype-bool", create(dtype=True), T, ("dtype",)),
    ApiCase("create-dtype-enum-13", create(dtype=13), T, ("dtype",)),
    ApiCase("create-dtype-complex", create(dtype=np.complex64), T, ("dtype",)),
    ApiCase("create-shape-str", create(shape="64x64"), T, ("shape",)),
    ApiCase("create-shape-float", create(shape=(64.0, 64)), T, ("shape[0]",)),
    ApiCase("create-shape-none", create(shape=None), T, ("shape",)),
    ApiCase("create-shape-bool", create(shape=(True, 64)), T, ("shape[0]",)),
    ApiCase("create-box-str-item", create(box=(64, "64")), T, ("box[1]",)),
    ApiCase("create-strides-float", create(strides=(64.5, 1)), T, ("strides[0]",)),
    ApiCase("create-strides-and-bytes", create(strides=(64, 1), strides_bytes=(128, 2)), T, ("strides",)),
    ApiCase("create-element-strides-str", create(element_strides="11"), T, ("element_strides",)),
    ApiCase("create-swizzle-unknown-name", create(swizzle="256B"), T, ("swizzle",)),
    ApiCase("create-swizzle-float", create(swizzle=1.0), T, ("swizzle",)),
    ApiCase("create-interleave-list", create(interleave=[1]), T, ("interleave",)),
    ApiCase("create-oob-fill-name", create(oob_fill="nan-please"), T, ("oob_fill",)),
    ApiCase("create-l2-none", create(l2_promotion=None), T, ("l2_promotion",)),
    ApiCase("create-address-xyz", create(base_address="xyz"), T, ("base_address", "xyz")),
    ApiCase("create-address-negative", create(base_address=-16), T, ("base_address",)),
    ApiCase("create-address-negative-hex", create(base_address="-0x10"), T, ("base_address",)),
    ApiCase("create-address-float", create(base_address=4096.0), T, ("base_address",)),
    ApiCase("create-address-too-big", create(base_address=1 << 64), T, ("base_address",)),
    ApiCase("create-address-hex-misaligned", create(base_address="0x18"), T, ("base_address",)),
    ApiCase("create-allow-overlap-str", create(allow_overlap="no"), T, ("allow_overlap",)),
    ApiCase("create-allow-undocumented-int", create(allow_undocumented=2), T, ("allow_undocumented",)),
    ApiCase("create-unknown-option", create(swizle=3), T, ("swizle",)),
    # ---- TensorMapSpec.create: rules (validate)
    ApiCase("validate-rank-6", create(shape=(2,) * 6, box=(1,) * 5 + (8,)), T, ("shape",)),
    ApiCase("validate-dim-zero", create(shape=(0, 64)), T, ("shape[0]",)),
    ApiCase("validate-dim-negative", create(shape=(-4, 64)), T, ("shape[0]",)),
    ApiCase("validate-box-zero", create(box=(0, 64)), T, ("box[0]",)),
    ApiCase("validate-box-257", create(shape=(512, 64), box=(257, 64)), T, ("box[0]",)),
    ApiCase("validate-box-rank", create(box=(64,)), T, ("box",)),
    ApiCase("validate-inner-bytes", create(box=(64, 4)), T, ("box[1]",)),
    ApiCase("validate-stride-alignment", create(strides_bytes=(130, 2)), T, ("strides_bytes[0]",)),
    ApiCase("validate-inner-stride", create(strides_bytes=(256, 4)), T, ("strides_bytes[1]",)),
    ApiCase("validate-stride-zero", create(strides_bytes=(0, 2)), T, ("strides_bytes[0]",)),
    ApiCase("validate-stride-negative", create(strides_bytes=(-128, 2)), T, ("strides_bytes[0]",)),
    ApiCase("validate-element-stride-9", create(element_strides=(9, 1)), T, ("element_strides[0]",)),
    ApiCase("validate-swizzle-span", create(swizzle="32B"), T, ("box[1]",)),
    ApiCase("validate-nan-fill-int", create(dtype="int32", oob_fill="nan"), T, ("oob_fill",)),
    ApiCase("validate-interleave-rank", create(interleave="16B"), T, ("interleave",)),
    ApiCase("validate-enum-out-of-range", create(swizzle=9), T, ("swizzle",)),
    ApiCase("validate-smem-limit-str", lambda: spec().validate(smem_limit="big"), T, ("smem_limit",)),
    ApiCase("is-valid-smem-limit-negative", lambda: spec().is_valid(smem_limit=-1), T, ("smem_limit",)),
    # ---- from_dict / from_json
    ApiCase("from-dict-list", from_dict([1, 2]), T, ("spec", "list")),
    ApiCase("from-dict-none", from_dict(None), T, ("spec",)),
    ApiCase("from-dict-no-box", from_dict({"dtype": "float16", "shape": [64, 64]}), T, ("box",)),
    ApiCase("from-dict-unknown-field", from_dict({"dtype": "f16", "shape": [64], "box": [64], "boxx": 1}), T,
            ("boxx",)),
    ApiCase("from-dict-address-xyz", from_dict({"dtype": "f16", "shape": [64], "box": [64], "base_address": "xyz"}),
            T, ("base_address", "xyz")),
    ApiCase("from-dict-address-negative", from_dict({"dtype": "f16", "shape": [64], "box": [64],
                                                     "base_address": -16}), T, ("base_address",)),
    ApiCase("from-dict-shape-strings", from_dict({"dtype": "f16", "shape": ["64"], "box": [64]}), T, ("shape[0]",)),
    ApiCase("from-json-list", lambda: TensorMapSpec.from_json("[1, 2]"), T, ("spec", "list")),
    ApiCase("from-json-invalid", lambda: TensorMapSpec.from_json("{not json"), T, ("json",)),
    ApiCase("from-json-number", lambda: TensorMapSpec.from_json("42"), T, ("spec",)),
    ApiCase("from-json-empty", lambda: TensorMapSpec.from_json(""), T, ("json",)),
    ApiCase("from-json-dict-given", lambda: TensorMapSpec.from_json({"dtype": "f16"}), T, ("json",)),
    ApiCase("from-json-null-dtype", lambda: TensorMapSpec.from_json('{"dtype": null, "shape": [64], "box": [64]}'),
            T, ("dtype",)),
    # ---- for_array / from_buffer
    ApiCase("for-array-not-an-array", lambda: TensorMapSpec.for_array([[1, 2]], (1, 8)), T, ("arr", "list")),
    ApiCase("for-array-none", lambda: TensorMapSpec.for_array(None, (1, 8)), T, ("arr",)),
    ApiCase("for-array-dtype-size", lambda: TensorMapSpec.for_array(np.zeros((8, 8), np.float32), (8, 8),
                                                                    dtype="float16"), T, ("dtype",)),
    ApiCase("for-array-complex", lambda: TensorMapSpec.for_array(np.zeros((8, 8), np.complex64), (8, 8)), T,
            ("dtype",)),
    ApiCase("for-array-object", lambda: TensorMapSpec.for_array(np.array([[None] * 8]), (1, 8)), T, ("dtype",)),
    ApiCase("for-array-cai-no-shape", lambda: TensorMapSpec.for_array(cai(shape=...), (8, 8)), T, ("shape",)),
    ApiCase("for-array-cai-bad-typestr", lambda: TensorMapSpec.for_array(cai(typestr="<q9"), (8, 8)), T,
            ("typestr",)),
    ApiCase("for-array-cai-no-typestr", lambda: TensorMapSpec.for_array(cai(typestr=None), (8, 8)), T, ("typestr",)),
    ApiCase("for-array-cai-data-str", lambda: TensorMapSpec.for_array(cai(data=("0x10", False)), (8, 8)), T,
            ("data",)),
    ApiCase("for-array-cai-not-dict", lambda: TensorMapSpec.for_array(
        SimpleNamespace(__cuda_array_interface__=[1]), (8, 8)), T, ("__cuda_array_interface__",)),
    ApiCase("for-array-cai-strides-rank", lambda: TensorMapSpec.for_array(cai(strides=(2,)), (8, 8)), T,
            ("strides",)),
    ApiCase("for-array-box-str", lambda: TensorMapSpec.for_array(np.zeros((8, 8), np.float16), "8x8"), T, ("box",)),
    ApiCase("from-buffer-no-ptr", lambda: TensorMapSpec.from_buffer(object(), "f16", (64,), (64,)), T, ("buf",)),
    ApiCase("from-buffer-offset-negative", lambda: TensorMapSpec.from_buffer(
        SimpleNamespace(ptr=ADDR, nbytes=4096), "f16", (64,), (64,), offset_bytes=-16), T, ("offset_bytes",)),
    ApiCase("from-buffer-offset-str", lambda: TensorMapSpec.from_buffer(
        SimpleNamespace(ptr=ADDR, nbytes=4096), "f16", (64,), (64,), offset_bytes="16"), T, ("offset_bytes",)),
    ApiCase("from-buffer-ptr-negative", lambda: TensorMapSpec.from_buffer(
        SimpleNamespace(ptr=-4096, nbytes=4096), "f16", (64,), (64,)), T, ("buf.ptr",)),
    ApiCase("replace-address-xyz", lambda: spec().replace(base_address="xyz"), T, ("base_address",)),
    ApiCase("tma-coordinates-float", lambda: spec().tma_coordinates((0.5, 0)), T, ("coordinates[0]",)),
    # ---- encode_tiled (refused before the driver)
    ApiCase("encode-spec-str", lambda: encode_tiled("str"), T, ("spec", "str")),
    ApiCase("encode-spec-dict", lambda: encode_tiled({"dtype": "f16"}), T, ("spec",)),
    ApiCase("encode-no-address", lambda: encode_tiled(spec().replace(base_address=None)), T, ("target",)),
    ApiCase("encode-target-str", lambda: encode_tiled(spec(), "xyz"), T, ("target",)),
    ApiCase("encode-target-float", lambda: encode_tiled(spec(), 4096.0), T, ("target",)),
    ApiCase("encode-target-negative", lambda: encode_tiled(spec(), -4096), T, ("target",)),
    ApiCase("encode-target-bool", lambda: encode_tiled(spec(), True), T, ("target",)),
    ApiCase("encode-target-host-array", lambda: encode_tiled(spec(), np.zeros((64, 64), np.float16)), T,
            ("target", "host memory")),
    ApiCase("encode-target-misaligned", lambda: encode_tiled(spec(), ADDR + 8), T, ("base_address",)),
    ApiCase("encode-target-small-buffer", lambda: encode_tiled(spec(), SimpleNamespace(ptr=ADDR, nbytes=64)), T,
            ("shape",)),
    ApiCase("encode-target-nbytes-str", lambda: encode_tiled(spec(), SimpleNamespace(ptr=ADDR, nbytes="4096")), T,
            ("target.nbytes",)),
    ApiCase("encode-invalid-spec", lambda: encode_tiled(spec(box=(64, 4))), T, ("box[1]",)),
    ApiCase("encode-smem-limit-str", lambda: encode_tiled(spec(), smem_limit="227K"), T, ("smem_limit",)),
    # ---- decode / encode_bytes
    ApiCase("decode-non-hex", lambda: D.decode("zz" * 128), T, ("bytes", "hex")),
    ApiCase("decode-odd-digits", lambda: D.decode("0" * 255), T, ("bytes",)),
    ApiCase("decode-two-halves", lambda: D.decode("0x" + "0" * 128 + " 0x" + "0" * 128), T, ("bytes",)),
    ApiCase("decode-short-hex", lambda: D.decode("00" * 64), T, ("bytes",)),
    ApiCase("decode-none", lambda: D.decode(None), T, ("bytes", "NoneType")),
    ApiCase("decode-int", lambda: D.decode(12345), T, ("bytes",)),
    ApiCase("decode-float-list", lambda: D.decode([1.5] * 128), T, ("bytes",)),
    ApiCase("decode-values-over-255", lambda: D.decode([300] * 128), T, ("bytes",)),
    ApiCase("decode-object", lambda: D.decode(object()), T, ("bytes",)),
    ApiCase("decode-rank-8", lambda: D.decode((7 << 68).to_bytes(128, "little")), T, ("rank",)),
    ApiCase("encode-bytes-str", lambda: D.encode_bytes("spec"), T, ("spec",)),
    ApiCase("encode-bytes-no-address", lambda: D.encode_bytes(spec().replace(base_address=None)), T, ("address",)),
    ApiCase("encode-bytes-address-xyz", lambda: D.encode_bytes(spec(), "xyz"), T, ("address",)),
    ApiCase("encode-bytes-invalid-box", lambda: D.encode_bytes(spec(box=(300, 64))), T, ("box[0]",)),
    ApiCase("encode-bytes-misaligned", lambda: D.encode_bytes(spec(), ADDR + 4), T, ("base_address",)),
    # ---- replace.Edit and its models
    ApiCase("edit-unknown-field", lambda: R.Edit("boxdim", 64), T, ("field", "boxdim")),
    ApiCase("edit-value-str", lambda: R.Edit("box_dim", "64"), T, ("box_dim",)),
    ApiCase("edit-value-float", lambda: R.Edit("box_dim", 1.5), T, ("box_dim",)),
    ApiCase("edit-box-zero", lambda: R.Edit("box_dim", 0), T, ("box_dim",)),
    ApiCase("edit-ord-str", lambda: R.Edit("box_dim", 64, ord="0"), T, ("ord",)),
    ApiCase("edit-ord-5", lambda: R.Edit("box_dim", 64, ord=5), T, ("ord",)),
    ApiCase("edit-stride-unaligned", lambda: R.Edit("global_stride", 24), T, ("global_stride",)),
    ApiCase("edit-address-negative", lambda: R.Edit("global_address", -16), T, ("global_address",)),
    ApiCase("edit-rank-str", lambda: R.Edit.rank("2"), T, ("rank",)),
    ApiCase("edit-rank-6", lambda: R.Edit.rank(6), T, ("rank",)),
    ApiCase("edit-elemtype-none", lambda: R.Edit.elemtype(None), T, ("dtype",)),
    ApiCase("apply-spec-ord-past-rank", lambda: R.apply_to_spec(spec(), R.Edit("box_dim", 8, 3)), T, ("ord",)),
    ApiCase("apply-spec-grow-rank", lambda: R.apply_to_spec(spec(), R.Edit.rank(4)), T, ("rank",)),
    ApiCase("apply-spec-not-an-edit", lambda: R.apply_to_spec(spec(), ("box_dim", 8)), T, ("edit",)),
    ApiCase("apply-bytes-not-an-edit", lambda: R.apply_to_bytes(bytes(128), "box_dim=8"), T, ("edit",)),
    ApiCase("apply-bytes-short", lambda: R.apply_to_bytes(bytes(64), R.Edit("box_dim", 8)), T, ("bytes",)),
    ApiCase("edits-to-rank", lambda: R.edits_to(spec(), TensorMapSpec.create("f16", (64,), (64,))), T, ("rank",)),
    ApiCase("edits-to-str", lambda: R.edits_to(spec(), "spec"), T, ("spec",)),
    # ---- stores and reductions
    ApiCase("reduce-op-unknown", lambda: S.check_reduction("sum", "float32"), T, ("op", "sum")),
    ApiCase("reduce-op-none", lambda: S.check_reduction(None, "float32"), T, ("op",)),
    ApiCase("reduce-dtype-f64", lambda: S.check_reduction("add", "float64"), T, ("dtype",)),
    ApiCase("reduce-dtype-none", lambda: S.check_reduction("add", None), T, ("dtype",)),
    ApiCase("store-spec-str", lambda: S.check_store_spec("spec"), T, ("spec",)),
    ApiCase("store-interleave", lambda: S.check_store_spec(
        TensorMapSpec.create("f16", (4, 4, 64), (1, 1, 8), interleave="16B")), T, ("interleave",)),
    ApiCase("store-negative-coordinate", lambda: S.check_store_coordinates(spec(), (-1, 0)), T, ("coords[0]",)),
    ApiCase("store-coordinate-float", lambda: S.check_store_coordinates(spec(), (1.5, 0)), T, ("coordinates",)),
    ApiCase("store-coordinates-rank", lambda: S.check_store_coordinates(spec(), (0,)), T, ("coordinates",)),
    ApiCase("store-coordinate-misaligned", lambda: S.check_store_coordinates(spec(), (0, 3)), T,
            ("coordinates[0][1]",)),
    ApiCase("store-targets-negative", lambda: S.store_targets(spec(), (-8, 0)), T, ("coords[0]",)),
    ApiCase("bulk-store-misaligned", lambda: S.check_bulk_store(8, 16), T, ("dst",)),
    ApiCase("bulk-store-size-zero", lambda: S.check_bulk_store(0, 0), T, ("bytes",)),
    ApiCase("bulk-store-dst-str", lambda: S.check_bulk_store("x", 16), T, ("dst",)),
    ApiCase("store-case-smem-offset", lambda: S.check_case(S.StoreCase(spec(), (0, 0), "store", 100)), T,
            ("smem_offset",)),
    ApiCase("reduce-values-op", lambda: S.reduce_values("mul", "uint32", [1], [2]), T, ("op",)),
    ApiCase("apply-store-base-offset", lambda: S.apply_store(np.zeros(1 << 14, np.uint8), 3, spec(), (0, 0),
                                                             np.zeros((64, 64), np.float16)), T, ("base_offset",)),
    ApiCase("load-coordinates-str", lambda: check_load_coordinates(spec(), [("a", "b")]), T, ("coordinates",)),
    ApiCase("load-coordinates-s32", lambda: check_load_coordinates(spec(), [(1 << 31, 0)]), T, ("coordinates[0][0]",)),
    # ---- wgmma descriptors
    ApiCase("desc-decode-float", lambda: SmemDescriptor.decode(1.5), W, ("descriptor",)),
    ApiCase("desc-decode-abc", lambda: SmemDescriptor.decode("abc"), W, ("descriptor", "abc")),
    ApiCase("desc-decode-none", lambda: SmemDescriptor.decode(None), W, ("descriptor",)),
    ApiCase("desc-decode-negative", lambda: SmemDescriptor.decode(-1), W, ("descriptor",)),
    ApiCase("desc-decode-65-bits", lambda: SmemDescriptor.decode(1 << 64), W, ("descriptor",)),
    ApiCase("desc-decode-reserved", lambda: SmemDescriptor.decode(1 << 46), W, ("descriptor",)),
    ApiCase("desc-decode-bool", lambda: SmemDescriptor.decode(True), W, ("descriptor",)),
    ApiCase("desc-start-float", lambda: SmemDescriptor(1.5, 16, 1024), W, ("start",)),
    ApiCase("desc-lbo-str", lambda: SmemDescriptor(0, "16", 1024), W, ("lbo",)),
    ApiCase("desc-sbo-none", lambda: SmemDescriptor(0, 16, None), W, ("sbo",)),
    ApiCase("desc-base-offset-bool", lambda: SmemDescriptor(0, 16, 1024, 0, True), W, ("base_offset",)),
    ApiCase("desc-swizzle-5", lambda: SmemDescriptor(0, 16, 1024, 5), W, ("swizzle",)),
    ApiCase("desc-swizzle-name", lambda: SmemDescriptor(0, 16, 1024, "256B"), W, ("swizzle",)),
    ApiCase("desc-swizzle-float", lambda: SmemDescriptor(0, 16, 1024, 1.0), W, ("swizzle",)),
    ApiCase("desc-encode-start-range", lambda: SmemDescriptor(1 << 18, 16, 1024).encode(), W, ("start",)),
    ApiCase("desc-encode-lbo-alignment", lambda: SmemDescriptor(0, 24, 1024).encode(), W, ("lbo",)),
    ApiCase("desc-encode-base-offset", lambda: SmemDescriptor(0, 16, 1024, 1, 8).encode(), W, ("base_offset",)),
    ApiCase("desc-advanced-float", lambda: SmemDescriptor(0, 16, 1024).advanced(32.0), W, ("nbytes",)),
    ApiCase("check-descriptor-int", lambda: check_descriptor(0x40), W, ("descriptor",)),
    ApiCase("check-descriptor-start", lambda: check_descriptor(SmemDescriptor(8, 16, 128)), W, ("start",)),
    ApiCase("from-tma-swizzle-float", lambda: from_tma_swizzle(1.7), W, ("tma_swizzle",)),
    ApiCase("from-tma-swizzle-4", lambda: from_tma_swizzle(4), W, ("tma_swizzle",)),
    ApiCase("to-tma-swizzle-str", lambda: to_tma_swizzle("huge"), W, ("swizzle",)),
    # ---- wgmma rules and descriptor_for
    ApiCase("wgmma-type-unknown", lambda: wgmma_type("f8"), W, ("dtype",)),
    ApiCase("wgmma-type-none", lambda: wgmma_type(None), W, ("dtype",)),
    ApiCase("check-shape-n-float", lambda: check_shape("bf16", 64.0), W, ("N",)),
    ApiCase("check-shape-n-str", lambda: check_shape("bf16", "64"), W, ("N",)),
    ApiCase("check-shape-n-40-s8", lambda: check_shape("s8", 40), W, ("N",)),
    ApiCase("check-shape-m", lambda: check_shape("bf16", 64, m=128), W, ("M",)),
    ApiCase("check-shape-k", lambda: check_shape("bf16", 64, k=32), W, ("K",)),
    ApiCase("check-operands-major", lambda: check_operands("bf16", "row"), W, ("major_a",)),
    ApiCase("check-operands-fp8-mn", lambda: check_operands("e4m3", "K", "MN"), W, ("major_b",)),
    ApiCase("descriptor-for-spec-str", lambda: descriptor_for("spec", 0, "A", "K"), W, ("tmap_spec",)),
    ApiCase("descriptor-for-address-str", lambda: descriptor_for(wgmma_spec(), "0", "A", "K"), W, ("smem_address",)),
    ApiCase("descriptor-for-address-misaligned", lambda: descriptor_for(wgmma_spec(), 64, "A", "K"), W,
            ("smem_address",)),
    ApiCase("descriptor-for-operand", lambda: descriptor_for(wgmma_spec(), 0, "C", "K"), W, ("operand",)),
    ApiCase("descriptor-for-major", lambda: descriptor_for(wgmma_spec(), 0, "A", "row"), W, ("major",)),
    ApiCase("descriptor-for-k-step-float", lambda: descriptor_for(wgmma_spec(), 0, "A", "K", 1.0), W, ("k_step",)),
    ApiCase("descriptor-for-k-step-range", lambda: descriptor_for(wgmma_spec(), 0, "A", "K", 4), W, ("k_step",)),
    ApiCase("descriptor-for-panels-zero", lambda: descriptor_for(wgmma_spec(), 0, "A", "K", panels=0), W,
            ("panels",)),
    ApiCase("descriptor-for-n-str", lambda: descriptor_for(wgmma_spec(), 0, "B", "K", n="64"), W, ("n",)),
    ApiCase("spec-for-tile-major", lambda: spec_for_tile("bf16", "row", 3, 64, 64), W, ("major",)),
    ApiCase("spec-for-tile-swizzle", lambda: spec_for_tile("bf16", "K", 7, 64, 64), W, ("tma_swizzle",)),
    ApiCase("spec-for-tile-mn-zero", lambda: spec_for_tile("bf16", "K", 3, 0, 64), W, ("mn",)),
    ApiCase("spec-for-tile-k-float", lambda: spec_for_tile("bf16", "K", 3, 64, 64.0), W, ("k",)),
    # ---- GemmConfig
    ApiCase("gemm-dtype-int8", lambda: GemmConfig(dtype="int8").check(), G, ("dtype",)),
    ApiCase("gemm-dtype-none", lambda: GemmConfig(dtype=None).check(), G, ("dtype",)),
    ApiCase("gemm-out-dtype", lambda: GemmConfig(out_dtype="float64").check(), G, ("out_dtype",)),
    ApiCase("gemm-bm-str", lambda: GemmConfig(bm="128").check(), G, ("bm",)),
    ApiCase("gemm-stages-float", lambda: GemmConfig(stages=2.5).check(), G, ("stages",)),
    ApiCase("gemm-stages-zero", lambda: GemmConfig(stages=0).check(), G, ("stages",)),
    ApiCase("gemm-stages-too-many", lambda: GemmConfig(stages=8).check(), G, ("stages",)),
    ApiCase("gemm-bn-100", lambda: GemmConfig(bn=100).check(), G, ("bn",)),
    ApiCase("gemm-bk-odd", lambda: GemmConfig(bk=40).check(), G, ("bk",)),
    ApiCase("gemm-setmaxnreg-str", lambda: GemmConfig(setmaxnreg="off").check(), G, ("setmaxnreg",)),
    ApiCase("gemm-persistent-int", lambda: GemmConfig(persistent=1).check(), G, ("persistent",)),
    ApiCase("gemm-swizzle-int", lambda: GemmConfig(swizzle=128).check(), G, ("swizzle",)),
    ApiCase("gemm-swizzle-name", lambda: GemmConfig(swizzle="256B").check(), G, ("swizzle",)),
    ApiCase("gemm-consumers-3", lambda: GemmConfig(consumers=3).check(), G, ("consumers",)),
    ApiCase("gemm-cluster-4", lambda: GemmConfig(cluster_m=4).check(), G, ("cluster_m",)),
    ApiCase("gemm-cluster-both-ways", lambda: GemmConfig(cluster_m=2, cluster_n=2).check(), G, ("cluster_n",)),
    ApiCase("gemm-streamk-cluster-n", lambda: GemmConfig(streamk=True, cluster_n=2).check(), G, ("streamk",)),
    ApiCase("gemm-mma-kind", lambda: GemmConfig(mma="hmma").check(), G, ("mma",)),
    ApiCase("gemm-inflight-2", lambda: GemmConfig(inflight=2).check(), G, ("inflight",)),
    ApiCase("gemm-regs", lambda: GemmConfig(consumer_regs=300).check(), G, ("consumer_regs",)),
    ApiCase("gemm-streamk-cluster", lambda: GemmConfig(streamk=True, cluster_m=2).check(), G, ("streamk",)),
    ApiCase("gemm-pingpong-str", lambda: GemmConfig(pingpong="yes").check(), G, ("pingpong",)),
    ApiCase("gemm-prefetch-maps-int", lambda: GemmConfig(prefetch_maps=1), G, ("prefetch_maps",)),
    ApiCase("gemm-l2-promotion-name", lambda: GemmConfig(l2_promotion="512B").check(), G, ("l2_promotion",)),
    ApiCase("gemm-l2-promotion-int", lambda: GemmConfig(l2_promotion=256), G, ("l2_promotion",)),
    ApiCase("gemm-pingpong-one-consumer", lambda: GemmConfig(pingpong=True, bm=64, consumers=1).check(), G,
            ("pingpong",)),
    ApiCase("gemm-swap-ab-f32-out", lambda: GemmConfig(swap_ab=True, out_dtype="float32").check(), G, ("out_dtype",)),
    ApiCase("conv2d-shape-tuple", lambda: Conv2d((2, 8, 8, 64)), G, ("shape",)),
    ApiCase("gemm-with-bad", lambda: GemmConfig().with_(group_m=None), G, ("group_m",)),
    ApiCase("gemm-problem-zero", lambda: GemmConfig().check_problem(0, 128, 64), G, ("m",)),
    ApiCase("gemm-problem-bool", lambda: GemmConfig().check_problem(True, 128, 64), G, ("m",)),
    ApiCase("gemm-problem-k-align", lambda: GemmConfig().check_problem(128, 128, 60), G, ("k",)),
    ApiCase("gemm-problem-n-float", lambda: GemmConfig().check_problem(128, 128.0, 64), G, ("n",)),
    ApiCase("gemm-for-problem-zero", lambda: GemmConfig().for_problem(0, 8192, 8192, 132), G, ("m",)),
    ApiCase("gemm-for-problem-negative", lambda: GemmConfig().for_problem(4096, -1, 4096, 132), G, ("n",)),
    ApiCase("gemm-for-problem-k-zero", lambda: GemmConfig().for_problem(4096, 4096, 0, 132), G, ("k",)),
    ApiCase("gemm-for-problem-sm-zero", lambda: GemmConfig().for_problem(4096, 4096, 4096, 0), G, ("sm_count",)),
    ApiCase("gemm-for-problem-str", lambda: GemmConfig().for_problem("4096", 4096, 4096, 132), G, ("m",)),
    # ---- clusters and launch configurations
    ApiCase("cluster-grid-multiple", lambda: check_cluster_shape(4, 3), C, ("grid",)),
    ApiCase("cluster-size-limit", lambda: check_cluster_shape(32, 32), C, ("cluster",)),
    ApiCase("cluster-size-portable", lambda: check_cluster_shape(16, 16), C, ("cluster",)),
    ApiCase("cluster-zero", lambda: check_cluster_shape(4, (0, 1)), C, ("cluster",)),
    ApiCase("cluster-float", lambda: check_cluster_shape(4, 2.0), C, ("cluster",)),
    ApiCase("cluster-bool", lambda: check_cluster_shape(4, True), C, ("cluster",)),
    ApiCase("cluster-grid-str", lambda: check_cluster_shape("4", 2), C, ("grid",)),
    ApiCase("cluster-four-dims", lambda: check_cluster_shape(4, (1, 1, 1, 1)), C, ("cluster",)),
    ApiCase("cluster-required-dims", lambda: check_cluster_shape(4, 4, required=(2, 1, 1)), C, ("cluster",)),
    ApiCase("launch-grid-zero", lambda: drvtma.LaunchConfig.make(0, 128), LaunchError, ("grid",)),
    ApiCase("launch-grid-bool", lambda: drvtma.LaunchConfig.make(True, 128), LaunchError, ("grid",)),
    ApiCase("launch-block-too-big", lambda: drvtma.LaunchConfig.make(1, (1024, 2)), LaunchError, ("block",)),
    ApiCase("launch-shared-mem-str", lambda: drvtma.LaunchConfig.make(1, 128, shared_mem="48K"), LaunchError,
            ("shared_mem",)),
    ApiCase("launch-shared-mem-negative", lambda: drvtma.LaunchConfig.make(1, 128, shared_mem=-1), LaunchError,
            ("shared_mem",)),
    ApiCase("launch-cluster-multiple", lambda: drvtma.LaunchConfig.make(3, 128, cluster=2), C, ("grid",)),
    ApiCase("multicast-mask-empty", lambda: check_multicast(Multicast(0, 0, coords=(0, 0)), 2), C, ("mask",)),
    ApiCase("multicast-issuer", lambda: check_multicast(Multicast(4, 1, coords=(0, 0)), 2), C, ("issuer",)),
    ApiCase("multicast-cluster-size", lambda: check_multicast(Multicast(0, 1, coords=(0, 0)), 17), C,
            ("cluster_ctas",)),
    # ---- runtime: buffers and kernels (refused before the driver)
    ApiCase("buffer-negative", lambda: DeviceBuffer(-1), A, ("nbytes",)),
    ApiCase("buffer-zero", lambda: DeviceBuffer(0), A, ("nbytes",)),
    ApiCase("buffer-str", lambda: DeviceBuffer("x"), A, ("nbytes",)),
    ApiCase("buffer-float", lambda: DeviceBuffer(1024.0), A, ("nbytes",)),
    ApiCase("buffer-bool", lambda: DeviceBuffer(True), A, ("nbytes",)),
    ApiCase("buffer-from-object-array", lambda: DeviceBuffer.from_array(None), A, ("arr",)),
    ApiCase("compile-missing-path", lambda: compile_cubin(Path("/no/such/kernel.cu")), A, ("source",)),
    ApiCase("compile-missing-name", lambda: compile_cubin("no_such_kernel.cu"), A, ("source",)),
    ApiCase("compile-missing-abs-str", lambda: compile_cubin("/no/such/kernel.cu"), A, ("source",)),
    ApiCase("compile-source-int", lambda: compile_cubin(123), A, ("source",)),
    ApiCase("compile-source-none", lambda: compile_cubin(None), A, ("source",)),
    ApiCase("compile-options-str", lambda: compile_cubin("extern \"C\" __global__ void k() {}\n",
                                                        options="-lineinfo"), A, ("options",)),
    ApiCase("compile-arch-int", lambda: compile_cubin("extern \"C\" __global__ void k() {}\n", arch=90), A,
            ("arch",)),
    ApiCase("compile-defines-list", lambda: compile_cubin("extern \"C\" __global__ void k() {}\n",
                                                         defines=["X=1"]), A, ("defines",)),
    ApiCase("load-module-missing", lambda: load_module("no_such_kernel.cu"), A, ("source",)),
    ApiCase("load-module-missing-path", lambda: load_module("tma/no_such_kernel.cu"), A, ("source",)),
    ApiCase("compile-include-dir-missing", lambda: compile_cubin("extern \"C\" __global__ void k() {}\n",
                                                                include_dirs=["/no/such/dir"]), A,
            ("include_dirs", "/no/such/dir")),
    ApiCase("compile-include-dirs-int", lambda: compile_cubin("extern \"C\" __global__ void k() {}\n",
                                                             include_dirs=5), A, ("include_dirs",)),
    ApiCase("load-module-params-list", lambda: load_module(b"\x7fELF" + bytes(60), params=[8]), A, ("params",)),
    ApiCase("load-module-params-size-zero", lambda: load_module(b"\x7fELF" + bytes(60), params={"k": [0]}), A,
            ("params",)),
    ApiCase("decode-words-short", lambda: D.decode(np.zeros(15, np.uint64)), T, ("bytes",)),
    # ---- fuzz campaigns and targets
    ApiCase("fuzz-target-unknown", lambda: get_target("no-such-target"), UnknownNameError, ("target",)),
    ApiCase("fuzz-target-none", lambda: get_target(None), UnknownNameError, ("target",)),
    ApiCase("fuzz-register-object", lambda: register(object()), A, ("target",)),
    ApiCase("fuzz-register-nameless", lambda: register(Target()), A, ("target.name",)),
    ApiCase("fuzz-examples-negative", _campaign(examples=-5), A, ("examples",)),
    ApiCase("fuzz-examples-zero", _campaign(examples=0), A, ("examples",)),
    ApiCase("fuzz-examples-float", _campaign(examples=2.5), A, ("examples",)),
    ApiCase("fuzz-seconds-negative", _campaign(examples=None, seconds=-1), A, ("seconds",)),
    ApiCase("fuzz-seconds-str", _campaign(examples=None, seconds="10"), A, ("seconds",)),
    ApiCase("fuzz-seconds-nan", _campaign(examples=None, seconds=float("nan")), A, ("seconds",)),
    ApiCase("fuzz-shard-k-past-n", _campaign(shard=(2, 2)), A, ("shard",)),
    ApiCase("fuzz-shard-zero", _campaign(shard=(0, 0)), A, ("shard",)),
    ApiCase("fuzz-shard-int", _campaign(shard=1), A, ("shard",)),
    ApiCase("fuzz-seed-str", _campaign(seed="abc"), A, ("seed",)),
    ApiCase("fuzz-target-name-str", _campaign(target="encode"), A, ("target",)),
    ApiCase("fuzz-options-none", _campaign(options=None), A, ("options",)),
    ApiCase("fuzz-merge-nothing", lambda: merge_results([]), A, ("parts",)),
    ApiCase("fuzz-kernel-direction", lambda: _fuzz_kernel(lambda *a: None, direction="sideways"), A, ("direction",)),
    ApiCase("fuzz-kernel-not-callable", lambda: _fuzz_kernel("run"), A, ("run",)),
    ApiCase("fuzz-kernel-strategy", lambda: _fuzz_kernel(lambda *a: None, strategy="cutlass"), A, ("strategy",)),
    ApiCase("fuzz-kernel-returns-none", lambda: _fuzz_kernel(lambda *a: None, examples=1, shrink=False), A,
            ("the kernel's return value", "shape")),
    ApiCase("fuzz-kernel-reference", lambda: _load_kernel("file_without_a_name"), A, ("kernel",)),
    ApiCase("store-runner-name", lambda: _store_runner("image store"), A, ("name", "image store")),
    ApiCase("store-runner-source", lambda: _store_runner("image_store", source=None), A, ("source",)),
    ApiCase("cuda-core-runner-binary", lambda: _cuda_core_runner(b"\x7fELF"), A, ("source",)),
    ApiCase("cuda-core-store-dtype", lambda: _cuda_core_store(TensorMapSpec.create("tfloat32", (10, 40), (4, 8))),
            T, ("store_dtype", "tfloat32")),
    ApiCase("cuda-core-store-op", lambda: _cuda_core_store(TensorMapSpec.create("uint32", (10, 40), (4, 8)), "up"),
            A, ("op", "up")),
    ApiCase("store-runner-negative", lambda: _store_runner()(*_store_case(coords=(-1, 16))), T, ("coords[0]",)),
    ApiCase("store-runner-op", lambda: _store_runner()(*_store_case(op="sideways")), A, ("op", "sideways")),
    ApiCase("store-runner-box", lambda: _store_runner()(*_store_case(box=np.zeros(3))), A, ("box", "(4, 8)")),
    ApiCase("store-runner-base", lambda: _store_runner()(*_store_case(base=8)), A, ("base",)),
    # ---- testing strategies
    ApiCase("strategy-rng-none", lambda: RngChooser(None), A, ("rng",)),
    ApiCase("strategy-integer-empty", lambda: rng().integer(5, 1), A, ("lo, hi",)),
    ApiCase("strategy-integer-float", lambda: rng().integer(0, 2.5), A, ("hi",)),
    ApiCase("strategy-max-rank-9", lambda: build_valid_spec(rng(), max_rank=9), A, ("max_rank",)),
    ApiCase("strategy-max-rank-0", lambda: build_valid_spec(rng(), max_rank=0), A, ("max_rank",)),
    ApiCase("strategy-dtypes-empty", lambda: build_valid_spec(rng(), dtypes=()), A, ("dtypes",)),
    ApiCase("strategy-dtypes-str", lambda: build_valid_spec(rng(), dtypes="float16"), A, ("dtypes",)),
    ApiCase("strategy-dtypes-unknown", lambda: build_valid_spec(rng(), dtypes=("nope",)), T, ("dtype",)),
    ApiCase("strategy-max-dim-zero", lambda: build_valid_spec(rng(), max_dim=0), A, ("max_dim",)),
    ApiCase("strategy-break-unknown-rule", lambda: break_rule(rng(), spec(), "no_such_rule"), A, ("rule",)),
    ApiCase("strategy-break-spec-str", lambda: break_rule(rng(), "spec", "rank"), A, ("spec",)),
    ApiCase("strategy-coordinates-spec-str", lambda: build_coordinates(rng(), "spec"), A, ("spec",)),
    ApiCase("strategy-special-bits-int", lambda: special_float_bits("int32"), A, ("dtype",)),
    ApiCase("strategy-special-bits-none", lambda: special_float_bits(None), T, ("dtype",)),
    # ---- show
    ApiCase("show-base-offset-unaligned", lambda: draw_image(wgmma_spec(), base_offset=100), A, ("base_offset", "100")),
    ApiCase("show-base-offset-str", lambda: draw_image(wgmma_spec(), base_offset="x"), A, ("base_offset",)),
    ApiCase("show-spec-str", lambda: draw_image("spec"), A, ("spec",)),
    ApiCase("show-coords-misaligned", lambda: draw_image(wgmma_spec(), (0, 3)), T, ("coordinates",)),
    ApiCase("show-unit-unknown", lambda: cells(draw_image(wgmma_spec()), "byte"), A, ("unit", "byte")),
    ApiCase("show-pattern-unknown", lambda: bank_report(draw_image(wgmma_spec()), "diagonal"), A, ("pattern",)),
    ApiCase("show-operand-c", lambda: overlay(draw_image(wgmma_spec()), "C"), A, ("wgmma", "C")),
    ApiCase("show-major-x", lambda: overlay(draw_image(wgmma_spec()), "B", "X"), W, ("major",)),
    ApiCase("check-images-shape", lambda: check_images(wgmma_spec(), [(0, 0)], np.zeros((1, 16), np.uint8),
                                                       np.zeros((1, 32), np.uint8)), A, ("got", "(1, 32)")),
    ApiCase("check-images-empty", lambda: check_images(wgmma_spec(), [(0, 0)], np.zeros(0), np.zeros(0)), A,
            ("got",)),
    ApiCase("failure-svg-hex", lambda: failure_svg(wgmma_spec(), (0, 0), 0, "zz", "zz"), A, ("expected",)),
    # ---- capabilities
    ApiCase("capability-target-text", lambda: capabilities.parse_target("hopper"), A, ("target", "hopper")),
    ApiCase("capability-unknown-feature", lambda: capabilities.require("warp_magic", capabilities.HOPPER), A,
            ("feature", "warp_magic")),
    # ---- im2col maps
    ApiCase("im2col-channels-float", lambda: im2col(channels_per_pixel=1.5), T, ("channels_per_pixel", "1.5")),
    ApiCase("im2col-corner-text", lambda: im2col(lower_corner="ab"), T, ("lower_corner",)),
    ApiCase("im2col-json-missing", lambda: Im2colSpec.from_dict({"dtype": "f16"}), T, ("shape",)),
    ApiCase("im2col-json-unknown", lambda: Im2colSpec.from_dict({"box": [1]}), T, ("box",)),
    ApiCase("im2col-json-text", lambda: Im2colSpec.from_json("{nope"), T, ("json",)),
    ApiCase("im2col-validate-rank", lambda: im2col(shape=(8, 16), lower_corner=(), upper_corner=()).validate(), T,
            ("rank", "shape")),
    ApiCase("im2col-validate-box", lambda: im2col(upper_corner=(-9, 0)).validate(), T, ("box_empty", "upper_corner")),
    ApiCase("im2col-validate-spec-type", lambda: validate_im2col(spec()), T, ("spec", "Im2colSpec")),
    ApiCase("im2col-encode-spec-type", lambda: encode_im2col(spec()), T, ("spec", "Im2colSpec")),
    ApiCase("im2col-base-outside", lambda: im2col_coordinates(im2col(), [(0, 7, 0, 0)], [(0, 0)]), T,
            ("base_outside_box", "coordinates")),
    ApiCase("im2col-offset-range", lambda: im2col_coordinates(im2col(), [(0, 0, 0, 0)], [(0, 256)]), T,
            ("offset_range", "offsets")),
    ApiCase("im2col-offsets-count", lambda: im2col_coordinates(im2col(), [(0, 0, 0, 0)] * 2, [(0, 0)] * 3), T,
            ("offsets",)),
    ApiCase("spec-target-text", lambda: spec(target="hopper"), T, ("target", "hopper")),
    ApiCase("spec-target-before-tma", lambda: spec(target="sm_86"), T, ("target", "sm_86")),
    ApiCase("spec-target-type", lambda: spec(target=90), T, ("target", "90")),
    ApiCase("packed-on-sm90", lambda: spec(dtype="16u4_align8b", strides_bytes=(32, 1), target="sm_90a").validate(),
            T, ("needs_subbyte_maps", "sm_100a")),
    ApiCase("packed-dim", lambda: TensorMapSpec.create("16u4_align8b", (200,), (128,), target="sm_100a").validate(),
            T, ("packed_dim", "256")),
    ApiCase("packed-store", lambda: S.check_store_spec(TensorMapSpec.create("16u4_align16b", (256,), (128,),
                                                                            target="sm_100a")), T, ("packed_store",)),
    ApiCase("gather4-rows", lambda: __import__("drvtma.tma.tiled.blackwell_rules", fromlist=["x"]).gather4_values(
        TensorMapSpec.create("u8", (8, 64), (1, 16), target="sm_100a"), np.zeros(512, np.uint8), 0, [1]), T,
        ("gather4_rows", "rows")),
    # ---- maps cuda.core's as_tensor_map cannot express (drvtma.fuzz.cuda_core)
    ApiCase("cuda-core-dtype", lambda: __import__("drvtma.fuzz.cuda_core", fromlist=["x"]).tensor_map_arguments(
        spec(dtype="tfloat32", strides_bytes=(256, 4))), ArgumentError, ("cuda_core_dtype", "dtype", "tfloat32")),
    ApiCase("cuda-core-box", lambda: __import__("drvtma.fuzz.cuda_core", fromlist=["x"]).tensor_map_arguments(
        spec(shape=(8, 64))), ArgumentError, ("cuda_core_box", "box", "(64, 64)")),
    # ---- im2col maps' bytes (drvtma.tma.im2col.decode) and tensormap.replace on them
    ApiCase("decode-im2col-map", lambda: D.decode(_im2col_bytes()), T, ("decode_im2col_map", "decode_im2col")),
    ApiCase("decode-im2col-tiled-map",
            lambda: _im2col_decode().decode_im2col(D.encode_bytes(spec(base_address=1 << 20))), T,
            ("decode_tiled_map", "mode")),
    ApiCase("encode-im2col-bytes-type", lambda: _im2col_decode().encode_im2col_bytes(spec()), T,
            ("spec", "Im2colSpec")),
    ApiCase("replace-im2col-box", lambda: R.apply_to_bytes(_im2col_bytes(), R.Edit("box_dim", 8)), T,
            ("replace_im2col_field", "box_dim", "re-encode")),
    ApiCase("replace-im2col-rank", lambda: R.apply_to_spec(im2col(), R.Edit.rank(3)), T,
            ("replace_im2col_field", "rank")),
]


def _im2col_decode():
    from drvtma.tma.im2col import decode as im2col_decode

    return im2col_decode


def _im2col_bytes() -> bytes:
    return _im2col_decode().encode_im2col_bytes(im2col(base_address=1 << 20))
