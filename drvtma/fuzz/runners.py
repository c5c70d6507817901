"""Ready runners over kernels you compiled with drvtma (a .cu file), for `fuzz_kernel` and `drvtma fuzz loads |
stores | reductions --kernel`: a `LoadKernel` and a `StoreKernel`, each launched through drvtma's checked launch
with the map by value, one CTA of 128 threads per box.

`CuLoadRunner(path, name)` loads a kernel of this signature and returns the images (n, spec.smem_bytes), the output
poisoned before the launch:

    extern "C" __global__ void NAME(const __grid_constant__ CUtensorMap map,
                                    const int* coords,   // [n][5], driver order (dim 0 first), unused slots 0
                                    int rank, u32 box_bytes /* expect_tx */, u32 image_bytes /* spec.smem_bytes */,
                                    unsigned char* out,  // [n][image_bytes]: the shared-memory image as loaded
                                    DrvtmaStatus* status);

`CuStoreRunner(path, name)` loads a kernel of this signature and returns all of memory after one store (or
reduction) of the box:

    extern "C" __global__ void NAME(const __grid_constant__ CUtensorMap map,
                                    const int* coords,   // [5], driver order (dim 0 first), unused slots 0
                                    int rank, int op,    // -1 store; 0 add .. 7 xor (drvtma.tma.stores.OP_CODES)
                                    const uint4* image,  // the box's shared-memory image, laid out for a
                                    u32 image_bytes);    // 1024-aligned address (spec.smem_bytes)

It has no status record: a store completes through the issuing thread's bulk group, not an mbarrier, so there is
no wait to bound (cu/tma/store_probe.cu). A store that faults ends the context, so the runner refuses what faults
(negative coordinates, an inner coordinate off 16 bytes, a reduction the map's type lacks) before the launch.

For either runner, `source` may also be a kernel of its signature built elsewhere: a cubin, fatbin or PTX file
(`nvcc -cubin -arch=sm_90a -I <drvtma's cu/include> k.cu`) or its bytes, loaded by `load_module` with its parameter
layout from the binary's own records (`options` and `defines` then do nothing).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ..errors import ArgumentError, StoreStraddleWarning
from ..runtime.driver import Resource, ScratchBuffers
from ..runtime.status import StatusBuffer
from ..tma.stores import CHUNK_BYTES, OP_CODES, check_store_coordinates, check_store_spec, smem_from_box
from ..tma.tiled.encode import encode_tiled
from ..tma.tiled.rules import round_up
from ..tma.tiled.spec import TensorMapSpec

POISON = 0x7FBADBAD
THREADS = 128


def runner_source(source, name, *, binary_ok: bool = True):
    """A runner's kernel source (a Path, or bytes of a cubin / fatbin / PTX built elsewhere), its name checked."""
    binary = binary_ok and isinstance(source, (bytes, bytearray, memoryview))
    if not binary and (not isinstance(source, (str, Path)) or not str(source)):
        raise ArgumentError("runner_source", "source", source, "give the path of your .cu file (relative to the "
                            "current directory, or absolute)" + (", or a binary's bytes" if binary_ok else ""))
    if not isinstance(name, str) or not name.isidentifier():
        raise ArgumentError("runner_kernel", "name", name, 'give the extern "C" name of your kernel')
    return bytes(source) if binary else Path(source)


class RunnerBuffers(Resource):
    """A runner's device memory, kept from call to call (a fuzz campaign calls it thousands of times: allocating
    and freeing four buffers each time cost more than the kernel): grow-only scratch for the case's memory, its
    coordinates, the output and the image, and one status record. Closed with the runner or at exit."""

    def __init__(self):
        self.scratch = ScratchBuffers(minimum=1 << 16)
        self.status = StatusBuffer()

    def upload(self, name: str, array: np.ndarray):
        """`array`'s bytes at the start of scratch `name` (larger buffers are reused: kernels read only what their
        map or arguments reach)."""
        buf = self.scratch.get(name, array.nbytes)
        buf.upload(np.ascontiguousarray(array))
        return buf

    def output(self, nbytes: int, poison: int):
        out = self.scratch.get("out", nbytes)
        out.fill_u32(poison)
        return out

    def _parts(self) -> tuple:
        return (self.scratch, self.status)


class BufferedRunner:
    """A runner that keeps its device memory (`RunnerBuffers`) between calls."""

    _buffers: RunnerBuffers | None = None

    def buffers(self) -> RunnerBuffers:
        if self._buffers is None:
            self._buffers = RunnerBuffers()
        return self._buffers

    def close(self) -> None:
        """Free the runner's device memory now (else it goes with the runner)."""
        if self._buffers is not None:
            self._buffers.close()
            self._buffers = None


class _CuRunner(BufferedRunner):
    def __init__(self, source, name: str, *, options=(), defines=None):
        self.source = runner_source(source, name)
        self.name, self.options, self.defines = name, tuple(options), defines
        self._kernel = None

    def kernel(self):
        if self._kernel is None:
            from ..runtime.kernel import load_module

            self._kernel = load_module(self.source, options=self.options, defines=self.defines).kernel(self.name)
        return self._kernel


class CuLoadRunner(_CuRunner):
    """A `LoadKernel` over your .cu kernel of the load signature above."""

    def __call__(self, memory: np.ndarray, base: int, spec, coords: np.ndarray) -> np.ndarray:
        n, b = len(coords), self.buffers()
        dev, cbuf = b.upload("memory", memory), b.upload("coords", box_starts(spec, coords))
        out, status = b.output(n * spec.smem_bytes, POISON), b.status
        status.reset()
        tmap = encode_tiled(spec.replace(base_address=dev.ptr + base))
        self.kernel().launch(tmap, cbuf, spec.rank, spec.expect_tx_bytes, spec.smem_bytes, out, status,
                             grid=n, block=THREADS, shared_mem=spec.smem_bytes + 1024)
        images = out.download(np.uint8, (n, spec.smem_bytes))
        status.check(self.name)
        return images


def box_starts(spec, coords: np.ndarray) -> np.ndarray:
    """The runner signature's `coords`: (n, 5) int32, driver order (dim 0 first), unused slots 0."""
    starts = np.zeros((len(coords), 5), np.int32)
    for i, c in enumerate(coords):
        starts[i, :spec.rank] = spec.tma_coordinates(tuple(int(v) for v in c))
    return starts


def store_arguments(memory, base, spec, coords, box, op):
    """What `CuStoreRunner` launches with, checked on the host: (driver-order coordinates [5] int32, op code,
    the shared-memory image). Raises ArgumentError / TensorMapError for what would fault or mislead."""
    if not isinstance(spec, TensorMapSpec):
        raise ArgumentError("runner_spec", "spec", type(spec).__name__, "give the TensorMapSpec of the case")
    if not isinstance(memory, np.ndarray) or memory.dtype != np.uint8 or memory.ndim != 1:
        what = f"{memory.dtype} of shape {memory.shape}" if isinstance(memory, np.ndarray) else type(memory).__name__
        raise ArgumentError("runner_memory", "memory", what, "give the 1-D uint8 memory of the case (guards and "
                            "tensor, drvtma.fuzz.kernel.store_memory)")
    if not isinstance(base, (int, np.integer)) or base < 0 or base % CHUNK_BYTES or \
            base + round_up(spec.extent_bytes, CHUNK_BYTES) > memory.size:
        raise ArgumentError("runner_base", "base", base, f"give a multiple of 16 with the tensor's "
                            f"{spec.extent_bytes} bytes after it inside memory ({memory.size} bytes)")
    if op not in OP_CODES:
        raise ArgumentError("runner_op", "op", op, f"use one of {', '.join(OP_CODES)}")
    with warnings.catch_warnings():  # a straddling inner edge is what the oracle checks, not a mistake here
        warnings.simplefilter("ignore", StoreStraddleWarning)
        check_store_spec(spec, op)
    tma = np.zeros(5, np.int32)
    tma[:spec.rank] = spec.tma_coordinates(check_store_coordinates(spec, coords))
    box = np.asarray(box)
    if box.shape != spec.loaded_counts:
        raise ArgumentError("runner_box", "box", f"shape {box.shape}", f"give the box's values, shape "
                            f"{spec.loaded_counts} (spec.loaded_counts)")
    return tma, OP_CODES[op], smem_from_box(spec, box)


class CuStoreRunner(_CuRunner):
    """A `StoreKernel` over your .cu kernel of the store signature above: one launch of one CTA per call."""

    def __call__(self, memory: np.ndarray, base: int, spec, coords: np.ndarray, box: np.ndarray,
                 op: str) -> np.ndarray:
        tma, code, image = store_arguments(memory, base, spec, coords, box, op)
        b = self.buffers()
        dev, cbuf, src = b.upload("memory", memory), b.upload("coords", tma), b.upload("image", image)
        tmap = encode_tiled(spec.replace(base_address=dev.ptr + base))
        self.kernel().launch(tmap, cbuf, spec.rank, code, src, spec.smem_bytes, grid=1, block=THREADS,
                             shared_mem=spec.smem_bytes + 1024)
        return dev.download(np.uint8, (memory.size,))  # a synchronous copy: it waits for the store
