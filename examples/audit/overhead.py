"""The audit's own cost: encode N maps (cuTensorMapEncodeTiled) and launch N kernels that take a map by value,
then a short torch training-like loop; prints one JSON line of seconds. `drvtma audit` runs it with the audit on;
`python overhead.py` runs it plain. `python overhead.py [N]`."""

import json
import sys
import time

from cuda.bindings import driver as cu

import drvtma


def main(n: int = 10_000) -> dict:
    kernel = drvtma.load_module("runtime/launch_cost.cu").kernel("map_args")  # a map by value; n = 0: no work
    out = drvtma.DeviceBuffer(4096)
    spec = drvtma.TensorMapSpec.create("float16", (256, 256), (64, 64), base_address=out.ptr)
    tm = drvtma.encode_tiled(spec)
    u32, u64 = cu.cuuint32_t, cu.cuuint64_t  # cuda-bindings takes the driver's integer types, not bare ints
    dim, stride, box, step = [u64(256), u64(256)], [u64(512)], [u32(64), u32(64)], [u32(1), u32(1)]
    t0 = time.perf_counter()
    for _i in range(n):  # the driver's encode, as a library calls it
        err, _ = cu.cuTensorMapEncodeTiled(cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, out.ptr,
                                           dim, stride, box, step,
                                           cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                                           cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
                                           cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                           cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        assert err == cu.CUresult.CUDA_SUCCESS, err
    t1 = time.perf_counter()
    for _i in range(n):
        kernel.launch(tm, out.ptr, 0, 0.0, grid=1, block=32)
    drvtma.synchronize()
    t2 = time.perf_counter()
    figures = {"encode_s": t1 - t0, "launch_s": t2 - t1, "n": n}
    try:
        import torch
    except ImportError:
        return figures
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512, device="cuda")
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    for _ in range(200):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    torch.cuda.synchronize()
    figures["torch_loop_s"] = time.perf_counter() - t3
    return figures


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)))
