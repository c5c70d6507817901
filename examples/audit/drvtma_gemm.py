"""drvtma's own TMA-fed wgmma GEMM, and a map encoded beside it that no kernel launches:
`drvtma audit -- python drvtma_gemm.py`. Needs a Hopper GPU."""

import numpy as np

import drvtma
from drvtma.gemm.launch import Gemm
from drvtma.gemm.reference import exact_operands, reference_gemm

gemm = Gemm()
m, n, k = 256, 256, 256
a, b = exact_operands(np.random.default_rng(1), gemm.config.dtype, m, n, k)
c = gemm.matmul(a, b)
print("drvtma gemm max error", float(np.abs(c.astype(np.float32) - reference_gemm(a, b).astype(np.float32)).max()))

# A map encoded and never launched (overlapping rows: a sliding window read as tiles)
with drvtma.DeviceBuffer(4096) as buf:
    spec = drvtma.TensorMapSpec.create("float16", (16, 64), (8, 64), strides_bytes=(32, 2), base_address=buf.ptr,
                                       allow_overlap=True)
    tm = drvtma.encode_tiled(spec)
    print("encoded an overlapping map:", spec.describe().splitlines()[0])
