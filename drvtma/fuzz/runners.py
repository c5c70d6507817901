"""Ready runners: `LoadKernel`s over kernels you compiled with drvtma (a .cu file), for `fuzz_kernel` and
`drvtma fuzz loads --kernel`.

`CuLoadRunner(path, name)` loads a kernel of this signature (one CTA per box, 128 threads), launched through
drvtma's checked launch with the map by value:

    extern "C" __global__ void NAME(const __grid_constant__ CUtensorMap map,
                                    const int* coords,   // [n][5], driver order (dim 0 first), unused slots 0
                                    int rank, u32 box_bytes /* expect_tx */, u32 image_bytes /* spec.smem_bytes */,
                                    unsigned char* out,  // [n][image_bytes]: the shared-memory image as loaded
                                    DrvtmaStatus* status);

and returns the images (n, spec.smem_bytes), the output poisoned before the launch.

`source` may also be a kernel of that signature built elsewhere: a cubin, fatbin or PTX file (`nvcc -cubin
-arch=sm_90a -I <drvtma's cu/include> k.cu`) or its bytes, loaded by `load_module` with its parameter layout from
the binary's own records (`options` and `defines` then do nothing).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

POISON = 0x7FBADBAD
THREADS = 128


class CuLoadRunner:
    def __init__(self, source, name: str, *, options=(), defines=None):
        binary = isinstance(source, (bytes, bytearray, memoryview))  # a cubin / fatbin / PTX built elsewhere
        self.source = bytes(source) if binary else Path(source)
        self.name, self.options, self.defines = name, tuple(options), defines
        self._kernel = None

    def kernel(self):
        if self._kernel is None:
            from ..runtime.kernel import load_module

            self._kernel = load_module(self.source, options=self.options, defines=self.defines).kernel(self.name)
        return self._kernel

    def __call__(self, memory: np.ndarray, base: int, spec, coords: np.ndarray) -> np.ndarray:
        from ..runtime.driver import DeviceBuffer
        from ..runtime.status import StatusBuffer
        from ..tma.encode import encode_tiled

        n = len(coords)
        with DeviceBuffer.from_array(memory) as dev, DeviceBuffer.from_array(box_starts(spec, coords)) as cbuf, \
                DeviceBuffer(n * spec.smem_bytes) as out, StatusBuffer() as status:
            out.fill_u32(POISON)
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
