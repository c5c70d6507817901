"""cuda.core as your toolchain: a `LoadKernel` and a `StoreKernel` whose kernel `cuda.core.Program` compiles
(drvtma's include folder on its include path), whose map is a `TensorMapDescriptor` from
`StridedMemoryView.as_tensor_map`, launched by `cuda.core.launch` on a cuda.core stream; and the "cuda.core"
strategy, the maps (for loads and for stores) that route can express.

`as_tensor_map` (cuda.core 1.2, through CCCL's `make_tma_descriptor`) is narrower than the driver: element types
only as NumPy / ml_dtypes dtypes (no tfloat32, no FTZ, no packed types), no Blackwell swizzle atoms, a box no longer
than the tensor on any axis, outer element strides at most the axis' length, strides nested in axis order (no
permuted or overlapping views). `CUDA_CORE_RULES` names each; `tensor_map_arguments`
refuses a spec that breaks one with an ArgumentError naming the option, and the strategy draws none of them.
Public cuda.core APIs only (its enum classes through `drvtma.compat.tensor_map_enums`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import numpy as np

from ..compat import tensor_map_enums
from ..errors import ArgumentError, Rule, broken_rules
from ..runtime.compiler import include_dir
from ..runtime.driver import call, cu
from ..testing import build_valid_spec
from ..tma.dtypes import tma_dtype
from ..tma.tiled.spec import SM90_SWIZZLES, TensorMapSpec
from .runners import POISON, THREADS, BufferedRunner, box_starts, runner_source, store_arguments
from .stores import StoreFuzzCase
from .user import DrvtmaSpecs

_SMEM_WITHOUT_OPT_IN = 48 * 1024
# drvtma's element type -> the dtype as_tensor_map takes (ml_dtypes' bfloat16 is cuda.core's route to BFLOAT16)
DTYPES = ("uint8", "uint16", "uint32", "int32", "uint64", "int64", "float16", "float32", "float64", "bfloat16")


def map_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


# ---------------------------------------------------------------------------------------------- what cuda.core takes

def _nested(spec: TensorMapSpec) -> bool:
    """Strides in axis order, each covering the next axis whole (CCCL: 0 or >= next stride x next length)."""
    return all(spec.strides_bytes[a] == 0 or spec.strides_bytes[a] >= spec.strides_bytes[a + 1] * spec.shape[a + 1]
               for a in range(spec.rank - 1)) and spec.strides_bytes[-1] == spec.itemsize


def _refuse(rule, parameter, value, fix, detail):
    return lambda spec: [ArgumentError(rule, parameter, value(spec), fix, detail)]


CUDA_CORE_RULES = (
    Rule(("cuda_core_dtype",), lambda spec: spec.dtype.name in DTYPES,
         _refuse("cuda_core_dtype", "dtype", lambda spec: spec.dtype.name, f"use one of {', '.join(DTYPES)}",
                 "as_tensor_map takes the element type as a NumPy / ml_dtypes dtype, and this one has none")),
    Rule(("cuda_core_swizzle",), lambda spec: spec.swizzle in SM90_SWIZZLES,
         _refuse("cuda_core_swizzle", "swizzle", lambda spec: int(spec.swizzle), "use none, 32B, 64B or 128B",
                 "cuda.core's TensorMapSwizzle has no 128B atom modes")),
    Rule(("cuda_core_box",), lambda spec: all(b <= n for b, n in zip(spec.box, spec.shape)),
         _refuse("cuda_core_box", "box", lambda spec: spec.box, "make no box axis longer than the tensor's",
                 "as_tensor_map (CCCL make_tma_descriptor) takes box[i] <= min(shape[i], 256)")),
    Rule(("cuda_core_element_strides",),
         lambda spec: all(e <= n for e, n in zip(spec.element_strides[:-1], spec.shape[:-1])),
         _refuse("cuda_core_element_strides", "element_strides", lambda spec: spec.element_strides,
                 "make no outer element stride larger than its axis' length",
                 "as_tensor_map takes element_strides[i] <= min(shape[i], 8)")),
    Rule(("cuda_core_strides",), _nested,
         _refuse("cuda_core_strides", "strides_bytes", lambda spec: spec.strides_bytes,
                 "nest the strides in axis order: each at least the next stride times the next length",
                 "a strided view reaches as_tensor_map in NumPy axis order; CCCL refuses permuted or overlapping "
                 "strides")),
)


def cuda_core_refusals(spec: TensorMapSpec) -> list[ArgumentError]:
    """Every rule of `CUDA_CORE_RULES` `spec` breaks (empty: cuda.core can express it)."""
    return cast("list[ArgumentError]", broken_rules(CUDA_CORE_RULES, spec))  # each rule's `_refuse` makes them


def tensor_map_arguments(spec: TensorMapSpec) -> dict:
    """What cuda.core needs for `spec`, NumPy order: the view (shape, strides in elements, typestr of the carrier)
    and `as_tensor_map`'s keywords, the enum options by driver value. The first broken rule is raised."""
    spec.validate()
    refused = cuda_core_refusals(spec)
    if refused:
        raise refused[0]
    s = spec.itemsize
    assert spec.element_strides is not None  # __post_init__ fills it
    es = tuple(spec.element_strides[:-1]) + (1,)  # the innermost one is ignored without interleave (CCCL sets 1)
    return {"shape": tuple(spec.shape), "strides": tuple(b // s for b in spec.strides_bytes),
            "typestr": np.dtype(f"<u{s}").str, "box_dim": tuple(spec.box), "element_strides": es,
            "data_type": map_dtype(spec.dtype.name), "interleave": int(spec.interleave),
            "swizzle": int(spec.swizzle), "l2_promotion": int(spec.l2_promotion), "oob_fill": int(spec.oob_fill)}


def map_options(arguments: dict) -> dict:
    """`as_tensor_map`'s keywords from `tensor_map_arguments`, the options as cuda.core's own enum members."""
    enums = tensor_map_enums()
    out = {k: arguments[k] for k in ("box_dim", "element_strides", "data_type")}
    return {**out, **{k: enums[k](arguments[k]) for k in enums}}


class _DeviceTensor:
    """The tensor in device memory as a CUDA Array Interface (v3) object, what StridedMemoryView reads."""

    def __init__(self, ptr: int, arguments: dict, itemsize: int):
        self.__cuda_array_interface__ = {
            "version": 3, "shape": arguments["shape"], "typestr": arguments["typestr"], "data": (ptr, False),
            "strides": tuple(n * itemsize for n in arguments["strides"]), "stream": None}


# ---------------------------------------------------------------------------------------------- the strategy

class CudaCoreSpecs(DrvtmaSpecs):
    """drvtma's valid maps (no interleave) and store cases made expressible through as_tensor_map (`_fit`): its
    element types only (the store types are the same ten), every axis at least as long as its box and element
    stride, strides re-nested in axis order."""

    name = "cuda.core"

    def refuses(self, spec: TensorMapSpec) -> str | None:
        """The first of CUDA_CORE_RULES that `spec` breaks (what as_tensor_map cannot express), else None."""
        broken = broken_rules(CUDA_CORE_RULES, spec)
        return broken[0].rule if broken else None

    def load_spec(self, ch, options: dict) -> TensorMapSpec:
        spec = build_valid_spec(ch, dtypes=tuple(tma_dtype(d) for d in DTYPES), interleave=False, address=False,
                                max_dim=ch.choice([8, 40, 300]), max_smem_bytes=ch.choice([2048, 16384]),
                                max_extent_bytes=options["max_extent_bytes"])
        return _fit(ch, spec, options["max_extent_bytes"])

    def store_case(self, ch, options: dict) -> StoreFuzzCase:
        """drvtma's store case (the user's map as given), its map fitted as `load_spec` fits one: the coordinates
        stay where they were (never negative, the inner one on a 16-byte boundary), still a valid store."""
        drawn = super().store_case(ch, options)
        if options.get("spec"):
            return drawn  # the user's own map: a map cuda.core cannot express is refused by name when it runs
        fitted = _fit(ch, drawn.case.spec, options["max_extent_bytes"])
        return StoreFuzzCase(replace(drawn.case, spec=fitted), drawn.data_seed)


def _fit(ch, spec: TensorMapSpec, max_extent_bytes: int) -> TensorMapSpec:
    """`spec` expressible through as_tensor_map: every axis as long as its box and element stride, strides nested
    (16-byte padding drawn); still too large, it loses its element strides and shrinks to what a box holds."""
    assert spec.element_strides is not None  # __post_init__ fills it
    shape = tuple(max(n, b, e) for n, b, e in zip(spec.shape, spec.box, spec.element_strides))
    fitted = _nest(spec, shape, [16 * ch.choice([0, 0, 1, 2]) for _ in shape])
    if fitted.extent_bytes > max_extent_bytes:
        counts = fitted.loaded_counts
        fitted = _nest(spec.replace(box=counts, element_strides=(1,) * spec.rank), counts, [0] * spec.rank)
        # the outermost axis up to twice its box where the extent allows: else a box shorter than its axis would
        # be rare at rank 5, where most maps land here
        longer = _nest(fitted, (counts[0] + ch.integer(0, counts[0]),) + counts[1:], [0] * spec.rank)
        fitted = longer if longer.extent_bytes <= max_extent_bytes else fitted
    return fitted


def _nest(spec: TensorMapSpec, shape, pads) -> TensorMapSpec:
    strides = [spec.itemsize] * spec.rank
    for a in range(spec.rank - 2, -1, -1):
        strides[a] = -(-strides[a + 1] * shape[a + 1] // 16) * 16 + pads[a]
    return spec.replace(shape=tuple(shape), strides_bytes=tuple(strides))


CUDA_CORE_SPECS = CudaCoreSpecs()


# ---------------------------------------------------------------------------------------------- the runner

class _CudaCoreRunner(BufferedRunner):
    """A .cu kernel compiled by `Program` for `arch` (the source's folder, `include_dirs` and drvtma's include folder
    searched, `defines` as macros), launched by cuda.core on a stream of `Device(0)` (made once, kept)."""

    def __init__(self, source, name: str, *, defines=None, include_dirs=(), arch: str = "sm_90a"):
        self.source, self.name, self.arch = runner_source(source, name, binary_ok=False), name, arch
        self.defines, self.include_dirs = dict(defines or {}), tuple(include_dirs)
        self._code = self._kernel = self._stream = None

    def program_options(self):
        from cuda.core import ProgramOptions

        paths = [str(self.source.resolve().parent), *map(str, self.include_dirs), str(include_dir())]
        macros = [(k, str(v)) for k, v in self.defines.items()]
        return ProgramOptions(name=self.source.name, arch=self.arch, std="c++17", include_path=paths,
                              **({"define_macro": macros} if macros else {}))

    def code(self):
        """The ObjectCode `Program` compiled (no GPU needed): `.code` is the cubin."""
        if self._code is None:
            from cuda.core import Program

            if not self.source.is_file():
                raise ArgumentError("kernel_source", "source", str(self.source), "give the path of your .cu file",
                                    "no such file")
            self._code = Program(self.source.read_text(), "c++", self.program_options()).compile("cubin")
        return self._code

    def kernel(self):
        if self._kernel is None:
            self._kernel = self.code().get_kernel(self.name)
        return self._kernel

    def _launch(self, spec: TensorMapSpec, arguments: dict, grid: int, tensor_ptr: int, *args) -> None:
        """One launch of `grid` CTAs: the map (as_tensor_map of `arguments`, tensor_map_arguments(spec), over the
        tensor at `tensor_ptr`) first, then `args`; returns once the stream is done."""
        from cuda.core import Device, LaunchConfig, launch

        from ..runtime.driver import context, synchronize

        context()  # drvtma's buffers live in device 0's primary context, the one Device(0) makes current
        device = Device(0)
        device.set_current()
        kernel, shared = self.kernel(), spec.smem_bytes + 1024  # + room to align the image to 1024 bytes
        if shared > _SMEM_WITHOUT_OPT_IN:
            _opt_in(kernel, shared)
        synchronize()  # drvtma's uploads and poison are done before cuda.core's stream (another one) runs
        desc = device_view(tensor_ptr, arguments, spec.itemsize).as_tensor_map(**map_options(arguments))
        stream = self._stream = self._stream or device.create_stream()
        launch(stream, LaunchConfig(grid=grid, block=THREADS, shmem_size=shared), kernel, desc, *args)
        stream.sync()


class CudaCoreLoadRunner(_CudaCoreRunner):
    """A LoadKernel over a .cu kernel of `drvtma.fuzz.runners.CuLoadRunner`'s signature, run the cuda.core way:
    compiled by `Program`, the map from `as_tensor_map` on a view of the tensor, launched by `launch`, the output
    poisoned first. Returns the shared-memory images (n, spec.smem_bytes)."""

    def __call__(self, memory: np.ndarray, base: int, spec: TensorMapSpec, coords: np.ndarray) -> np.ndarray:
        arguments = tensor_map_arguments(spec)  # what cuda.core cannot express, refused before any upload
        n, b = len(coords), self.buffers()
        tensor, cbuf = b.upload("memory", memory), b.upload("coords", box_starts(spec, coords))
        out, status = b.output(n * spec.smem_bytes, POISON), b.status
        status.reset()
        self._launch(spec, arguments, n, tensor.ptr + base, cbuf.ptr, np.int32(spec.rank),
                     np.uint32(spec.expect_tx_bytes), np.uint32(spec.smem_bytes), out.ptr, status.ptr)
        images = out.download(np.uint8, (n, spec.smem_bytes))
        status.check(self.name)
        return images


class CudaCoreStoreRunner(_CudaCoreRunner):
    """A StoreKernel over a .cu kernel of `drvtma.fuzz.runners.CuStoreRunner`'s signature, run the cuda.core way
    (one CTA per call): the case checked and the image built by `store_arguments`, as that runner does, so stores
    and every reduction the map's type takes; returns all of memory afterwards."""

    def __call__(self, memory: np.ndarray, base: int, spec: TensorMapSpec, coords: np.ndarray, box: np.ndarray,
                 op: str) -> np.ndarray:
        tma, code, image = store_arguments(memory, base, spec, coords, box, op)
        arguments = tensor_map_arguments(spec)
        b = self.buffers()
        tensor, cbuf, src = b.upload("memory", memory), b.upload("coords", tma), b.upload("image", image)
        self._launch(spec, arguments, 1, tensor.ptr + base, cbuf.ptr, np.int32(spec.rank), np.int32(code),
                     src.ptr, np.uint32(spec.smem_bytes))
        return tensor.download(np.uint8, (memory.size,))


def device_view(ptr: int, arguments: dict, itemsize: int):
    """A StridedMemoryView of the tensor at device address `ptr` laid out as `tensor_map_arguments` says."""
    from cuda.core.utils import StridedMemoryView

    return StridedMemoryView.from_cuda_array_interface(_DeviceTensor(ptr, arguments, itemsize), stream_ptr=-1)


def _opt_in(kernel, shared: int) -> None:
    """Dynamic shared memory above 48 KiB needs the kernel's opt-in (cuda.core 1.2's attributes are read-only)."""
    attribute = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    call(cu.cuKernelSetAttribute, attribute, shared, kernel.handle, 0)
