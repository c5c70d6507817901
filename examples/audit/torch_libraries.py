"""What torch's libraries launch (cuBLAS matmuls in bf16 and fp8, a channels-last cuDNN convolution, scaled dot
product attention): `drvtma audit -- python torch_libraries.py [matmul|fp8|conv|sdpa ...]`. Needs torch on a GPU."""

import sys

import torch


def matmul():
    a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 768, device="cuda", dtype=torch.bfloat16)
    return (a @ b).float().sum()


def fp8():
    a = torch.randn(1024, 512, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(768, 512, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm needs
    one = torch.tensor(1.0, device="cuda")
    return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16).float().sum()


def conv():
    x = torch.randn(8, 64, 56, 56, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    w = torch.randn(128, 64, 3, 3, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    return torch.nn.functional.conv2d(x, w, padding=1).float().sum()


def sdpa():
    q, k, v = (torch.randn(4, 8, 512, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).float().sum()


CASES = {"matmul": matmul, "fp8": fp8, "conv": conv, "sdpa": sdpa}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(CASES):
        print(name, float(CASES[name]()))
    torch.cuda.synchronize()
