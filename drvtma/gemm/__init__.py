"""A TMA-fed, warp-specialized wgmma GEMM (C = alpha * A . B^T, K-major operands) and cuBLAS beside it.
Its configuration answers the claims of the async tensor-core article, one field per claim:
"异步Tensor Core解析：从Hopper到Blackwell的GMMA与TMA实战" (a Chinese article on GMMA and TMA from Hopper to Blackwell).

- `config`: `GemmConfig` (one field per claim of the article), its derived sizes and the kernel's compile-time
  defines, descriptors from `drvtma.wgmma.descriptor_for`;
- `rules`: its named rules as tables (`GEMM_RULES`, `PROBLEM_RULES`, `CONV_RULES`: `GemmError` with a fix);
  `report`: `explain(config, problem)`, every rule listed as ok, broken or skipped (`drvtma check gemm` / `conv`);
- `reference`: the NumPy / ml_dtypes result and exactly representable operands;
- `launch`: `Gemm` (compile, load, bind operands to tensor maps, checked launches, poisoned outputs);
- `cublas`: cuBLASLt through nvmath-python's bindings, or torch when only that is installed;
- `bench`: `drvtma bench gemm` (same stream and events, L2 flushed, clocks and power read around the runs).
"""

from .config import GemmConfig, dtype_name
from .reference import exact_operands, reference_gemm
from .report import GemmReport, explain

__all__ = ["GemmConfig", "GemmReport", "dtype_name", "exact_operands", "explain", "reference_gemm"]
