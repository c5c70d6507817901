"""`drvtma bench descriptors`: what a load costs through each kind of tensor map, and what re-encoding costs.

Device side (cu/tma/global_map_bench.cu, CUDA events behind a stream hold): every CTA issues `loads` dependent
loads of one box through a by-value map, a global map (acquired once), a global map after prefetch.tensormap, or
a map it edits itself first. The slope between 1 and `loads` loads per CTA is the cost of one more load; the
1-load time minus the by-value one is what the map's placement adds to the first load.
Host side (wall clock, host and device together): N launches that each encode a new map (the article's
"re-encode and re-send the descriptor on every launch"), or write it into a global slot, against reusing one map.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...runtime.figures import table_text
from ...runtime.status import StatusBuffer
from ..tiled.encode import encode_tiled
from ..tiled.spec import TensorMapSpec
from .global_maps import MapSlots

SOURCE = "tma/global_map_bench.cu"
VARIANTS = ("by-value", "global", "global+prefetch", "device-edited")


@dataclass
class DescriptorBench:
    device_rows: list[tuple]  # (variant, us for 1 load per CTA, us for L loads, us per extra load)
    host_rows: list[tuple]  # (way, us per launch)
    loads: int
    blocks: int

    def text(self) -> str:
        dev = table_text(["map", "1 load/CTA (us)", f"{self.loads} loads/CTA (us)", "per extra load (us)",
                          "first load vs by-value (us)"], self.device_rows, "simple", numparse=True, floatfmt=".2f")
        host = table_text(["launch loop (host + device)", "us per launch"], self.host_rows, "simple", numparse=True,
                          floatfmt=".2f")
        return f"device time, {self.blocks} CTAs, one 2-D box of 8 KiB per load\n{dev}\n\n{host}"

    def figures(self) -> dict:
        return {"test": "bench_descriptors", "blocks": self.blocks, "loads": self.loads,
                **{f"{r[0]}_first_load_us": round(r[4], 3) for r in self.device_rows},
                **{f"{r[0]}_per_load_us": round(r[3], 3) for r in self.device_rows},
                **{f"host_{r[0].split()[0]}_us": round(r[1], 2) for r in self.host_rows}}


def run_descriptor_bench(*, loads: int = 16, runs: int = 20, warmups: int = 3, launches: int = 300,
                         blocks: int | None = None) -> DescriptorBench:
    from ...runtime.driver import DeviceBuffer, device_properties, synchronize
    from ...runtime.kernel import load_module
    from ...runtime.timing import collector_off, time_launches

    blocks = blocks or device_properties().sm_count
    kernel = load_module(SOURCE).kernel("descriptor_bench")
    rows_total = 4096
    with DeviceBuffer(rows_total * 256) as data, DeviceBuffer(4 * blocks) as sink, StatusBuffer() as status, \
            MapSlots(1) as gslot, MapSlots(blocks) as slots:
        data.fill_u32(0x3F800000)
        spec = TensorMapSpec.from_buffer(data, "float32", (rows_total, 64), (32, 64))
        tmap = encode_tiled(spec, data)
        gslot.write(0, tmap)

        def launch(variant: int, n: int, m=tmap):
            kernel.launch(m, gslot.address(0), slots.base, variant, n, rows_total, spec.expect_tx_bytes, sink,
                          status, grid=blocks, block=32, shared_mem=spec.smem_bytes + 1024)

        device_rows = []
        with collector_off():
            base_first = None
            for variant, name in enumerate(VARIANTS):
                t1 = time_launches(lambda: launch(variant, 1), runs=runs, warmups=warmups).median * 1e3
                tl = time_launches(lambda: launch(variant, loads), runs=runs, warmups=warmups).median * 1e3
                base_first = t1 if base_first is None else base_first
                device_rows.append((name, t1, tl, (tl - t1) / (loads - 1), t1 - base_first))
            status.check("descriptor_bench")

            def loop(step) -> float:
                synchronize()
                t0 = time.perf_counter()
                for _ in range(launches):
                    step()
                synchronize()
                return (time.perf_counter() - t0) / launches * 1e6

            def encode_each():
                launch(0, 1, encode_tiled(spec, data))

            def resend_each():
                gslot.write(0, tmap)
                launch(1, 1)

            host_rows = [("reuse one by-value map", loop(lambda: launch(0, 1))),
                         ("encode a new map per launch", loop(encode_each)),
                         ("copy the map to a global slot per launch", loop(resend_each))]
        status.check("descriptor_bench")
        if not np.all(sink.download(np.uint32, (blocks,)) == 0x3F800000):
            raise AssertionError("descriptor_bench: a CTA did not load the box")
    return DescriptorBench(device_rows, host_rows, loads, blocks)
