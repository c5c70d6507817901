"""A Triton matmul fed by host tensor descriptors (TMA loads of A and B, a TMA store of C): what `drvtma audit`
shows of Triton's maps. Needs triton and torch on a TMA GPU. `python triton_matmul.py [M N K]`."""

import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def matmul(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([m, k]), b_desc.load([k, n]))
    c_desc.store([m, n], acc.to(tl.float16))


def main(M=300, N=264, K=200, BM=128, BN=128, BK=64):
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    descs = [TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BK, BN]),
             TensorDescriptor.from_tensor(c, [BM, BN])]
    matmul[(triton.cdiv(M, BM), triton.cdiv(N, BN))](*descs, K, BM=BM, BN=BN, BK=BK)
    err = (c.float() - a.float() @ b.float()).abs().max().item()
    print(f"triton matmul {M}x{N}x{K}: max error {err:.3g}")
    assert err < 0.5


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
