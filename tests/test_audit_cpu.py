"""`drvtma audit` without a GPU: CUPTI's records built in ctypes memory (a fake CUPTI) drive the real capture, the
subscription, the judge, the report and the command line, including the refusals."""

from __future__ import annotations

import ctypes
import json
import sys
import types

import numpy as np
import pytest

from drvtma.audit import structs
from drvtma.audit.capture import Capture, caller_frames, image_layouts, library_of_kernel
from drvtma.audit.events import Counts, Launch, event_line, final_line, load_events, save_events
from drvtma.audit.judge import hazards, hints, judge, map_windows, spec_from_encode
from drvtma.audit.report import figure_lines, library_rows, write_report
from drvtma.cli.main import main
from drvtma.errors import AuditError
from drvtma.tma.im2col.decode import encode_im2col_bytes
from drvtma.tma.im2col.spec import Im2colSpec
from drvtma.tma.tiled.decode import encode_bytes
from drvtma.tma.tiled.spec import TensorMapSpec

ADDRESS = 0x7F12_3400_0000
KEEP: list = []  # ctypes objects a record points at stay alive for the test


def _keep(*objs):
    KEEP.extend(objs)
    return objs[0]


def _callback(api: str, params, result: int = 0, symbol: bytes | None = None) -> int:
    ret = _keep(ctypes.c_int(result))
    cb = _keep(structs.CallbackData(structs.API_EXIT, api.encode(), ctypes.addressof(params), ctypes.addressof(ret),
                                    symbol, None, 1, None, 1))
    return ctypes.addressof(cb)


def _u64(values):
    return _keep((ctypes.c_uint64 * max(len(values), 1))(*values))


def _u32(values):
    return _keep((ctypes.c_uint32 * max(len(values), 1))(*values))


def encode_record(spec: TensorMapSpec, raw: bytes | None = None, result: int = 0) -> int:
    """The CUpti_CallbackData of a cuTensorMapEncodeTiled exit for `spec`, its map holding `raw` (the driver's
    bytes by default)."""
    p = spec.tma_params()
    out = _keep(ctypes.create_string_buffer(raw if raw is not None else encode_bytes(spec, spec.base_address), 128))
    params = _keep(structs.EncodeTiledParams(
        ctypes.addressof(out), spec.dtype.enum, p.rank, spec.base_address, _u64(p.global_dim), _u64(p.global_strides),
        _u32(p.box_dim), _u32(p.element_strides), p.interleave, p.swizzle, p.l2_promotion, p.oob_fill))
    return _callback("cuTensorMapEncodeTiled", params, result)


def launch_record(symbol: bytes, *, args: list[bytes] | None = None, buffer: bytes | None = None,
                  grid=(2, 3, 1), function: int = 0x5000) -> int:
    """A cuLaunchKernel exit: arguments by kernelParams (one pointer per argument) or a packed `extra` buffer."""
    kernel_params = extra = None
    if args is not None:
        held = [_keep(ctypes.create_string_buffer(a, len(a))) for a in args]
        kernel_params = _keep((ctypes.c_void_p * len(held))(*[ctypes.addressof(h) for h in held]))
        kernel_params = ctypes.cast(kernel_params, ctypes.POINTER(ctypes.c_void_p))
    if buffer is not None:
        data = _keep(ctypes.create_string_buffer(buffer, len(buffer)))
        size = _keep(ctypes.c_uint64(len(buffer)))
        extra = _keep((ctypes.c_void_p * 5)(structs.CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(data),
                                            structs.CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size),
                                            structs.CU_LAUNCH_PARAM_END))
        extra = ctypes.cast(extra, ctypes.POINTER(ctypes.c_void_p))
    params = _keep(structs.LaunchKernelParams(function, *grid, 128, 1, 1, 0, None, kernel_params, extra))
    return _callback("cuLaunchKernel", params, 0, symbol)


def module_record(image: bytes) -> int:
    data = _keep(ctypes.create_string_buffer(image, len(image)))
    module = _keep(structs.ModuleResourceData(1, len(image), ctypes.addressof(data)))
    return ctypes.addressof(_keep(structs.ResourceData(None, None, ctypes.addressof(module))))


def spec_2d(**kw) -> TensorMapSpec:
    kw.setdefault("swizzle", 3)
    return TensorMapSpec.create("float16", (300, 200), (128, 64), base_address=ADDRESS, **kw)


# ---- capture: the records read back exactly
def test_an_encode_is_read_back_with_every_argument_and_the_bytes_the_driver_wrote():
    spec = spec_2d()
    c = Capture()
    c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec))
    (e,) = c.encodes
    assert not c.counts.errors
    assert e.args == {"boxDim": (64, 128), "tensorDataType": 6, "tensorRank": 2, "globalAddress": ADDRESS,
                      "globalDim": (200, 300), "globalStrides": (400,), "elementStrides": (1, 1), "interleave": 0,
                      "swizzle": 3, "l2Promotion": 0, "oobFill": 0}
    assert e.map_bytes == encode_bytes(spec, ADDRESS) and e.result == 0
    assert spec_from_encode(e.api, e.args).tma_params() == spec.tma_params()


def test_an_im2col_encode_is_read_back_and_agrees_with_its_bytes():
    spec = Im2colSpec.create("float16", (2, 9, 9, 64), (-1, -1), (1, 1), 64, 32, base_address=ADDRESS)
    p = spec.tma_params()
    out = _keep(ctypes.create_string_buffer(encode_im2col_bytes(spec, ADDRESS), 128))
    lo, hi = _keep((ctypes.c_int * 2)(*p.lower_corner)), _keep((ctypes.c_int * 2)(*p.upper_corner))
    params = _keep(structs.EncodeIm2colParams(
        ctypes.addressof(out), spec.dtype.enum, p.rank, ADDRESS, _u64(p.global_dim), _u64(p.global_strides), lo, hi,
        p.channels_per_pixel, p.pixels_per_column, _u32(p.element_strides), 0, 0, 0, 0))
    c = Capture()
    c.on_driver_exit("cuTensorMapEncodeIm2col", _callback("cuTensorMapEncodeIm2col", params))
    (e,) = c.encodes
    assert e.args["pixelBoxLowerCorner"] == tuple(p.lower_corner) and e.args["pixelsPerColumn"] == 32
    (v,) = judge(c.events()).maps.values()
    assert isinstance(v.spec, Im2colSpec) and v.agrees is True and v.driver_written


def test_a_failed_encode_keeps_no_bytes_and_is_not_judged():
    c = Capture()
    c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec_2d(), result=1))
    assert c.encodes[0].map_bytes is None and c.encodes[0].result == 1
    assert not judge(c.events()).maps


def test_a_failure_inside_a_callback_is_counted_never_raised_into_the_program():
    c = Capture()

    def full_disk(event):
        raise OSError(28, "No space left on device")

    c.sink = full_disk
    c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec_2d()))
    assert c.counts.errors == ["cuTensorMapEncodeTiled: OSError: [Errno 28] No space left on device"]
    empty = _keep(structs.EncodeTiledParams())  # NULL pointers everywhere: nothing to read, nothing raised
    c.sink = None
    c.on_driver_exit("cuTensorMapEncodeTiled", _callback("cuTensorMapEncodeTiled", empty))
    assert c.encodes[-1].map_bytes is None and len(c.counts.errors) == 1


# ---- launches
def test_a_map_by_value_is_found_at_its_parameter_with_the_layout_from_the_loaded_cubin():
    from drvtma.runtime.compiler import compile_cubin

    cubin = compile_cubin("runtime/launch_cost.cu")  # map_args(CUtensorMap map, float *out, int n, float v)
    # the map sits at 112, not 0: sm_90's parameter bank starts at 0x210, and the map is 64-aligned in the bank
    layout = image_layouts(cubin)["map_args"]
    assert layout == [(112, 128), (240, 8), (248, 4), (252, 4)]
    spec = spec_2d()
    c = Capture()
    c.on_module_loaded(module_record(cubin))
    c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec))
    raw = encode_bytes(spec, ADDRESS)
    for _ in range(3):
        c.on_driver_exit("cuLaunchKernel", launch_record(b"map_args", args=[raw, (0xDEAD00).to_bytes(8, "little"),
                                                                             bytes(4), bytes(4)]))
    (launch,) = c.launches.values()
    assert launch.count == 3 and launch.layout == layout and launch.arguments[112:240] == raw
    assert launch.arguments[240:248] == (0xDEAD00).to_bytes(8, "little")
    j = judge(c.events())
    (v,) = j.maps.values()
    assert [(u.offset, u.parameter) for u in v.launches] == [(112, 0)] and v.launch_count == 3
    assert v.agrees is True and not j.never_launched() and not j.not_encoded()


def test_the_sass_of_each_launched_kernel_says_whether_it_issues_tma_and_edits_maps_in_global_memory(tmp_path):
    """After the run, the cubins seen loading are disassembled once each: a kernel whose arguments hold no map but
    whose SASS issues tensor copies keeps its maps where the audit cannot read them; the report says so per launch.
    A kernel with no cubin seen gets no entry; a reading past its budget says why."""
    from drvtma.runtime.compiler import compile_cubin

    cubin = compile_cubin("tma/global_map.cu")  # global_map_load: a map behind a pointer, fenced (UTMACCTL.IV)
    c = Capture()
    c.on_module_loaded(module_record(cubin))
    c.on_driver_exit("cuLaunchKernel", launch_record(b"global_map_load", buffer=bytes(64)))
    c.on_driver_exit("cuLaunchKernel", launch_record(b"unseen_kernel", buffer=bytes(32)))
    c.read_kernel_tma()
    tma = c.counts.kernel_tma
    assert set(tma) == {"global_map_load"}, tma
    assert "UTMACCTL.IV" in tma["global_map_load"] and any(op.startswith("UTMALDG") for op in tma["global_map_load"])
    data = json.loads(write_report(tmp_path, judge(c.events()), c.counts, "p")[0].read_text())
    by_kernel = {x["kernel"]: x["tma_instructions"] for x in data["launches"]}
    assert by_kernel == {"global_map_load": tma["global_map_load"], "unseen_kernel": None}
    md = (tmp_path / "audit.md").read_text()
    assert "UTMACCTL.IV" in md and "no cubin seen" in md
    late = Capture()
    late.on_module_loaded(module_record(cubin))
    late.on_driver_exit("cuLaunchKernel", launch_record(b"global_map_load", buffer=bytes(64)))
    late.read_kernel_tma(seconds=-1)
    assert late.counts.kernel_tma["global_map_load"].startswith("not read: the"), late.counts.kernel_tma


def test_a_cubin_nvdisasm_cannot_read_says_so_for_every_kernel_of_it(monkeypatch):
    from drvtma.audit import capture as capture_module
    from drvtma.errors import DrvtmaError
    from drvtma.runtime.compiler import compile_cubin

    def unreadable(cubin):
        raise DrvtmaError("nvdisasm not found")

    monkeypatch.setattr(capture_module, "tma_instructions", unreadable)
    c = Capture()
    c.on_module_loaded(module_record(compile_cubin("tma/global_map.cu")))
    for kernel in (b"global_map_load", b"const_map_load"):
        c.on_driver_exit("cuLaunchKernel", launch_record(kernel, buffer=bytes(64)))
    c.read_kernel_tma()
    assert c.counts.kernel_tma == {k: "not read: nvdisasm not found" for k in ("global_map_load", "const_map_load")}


def test_a_packed_buffer_yields_only_the_windows_that_are_maps():
    raw = encode_bytes(spec_2d(), ADDRESS)
    rng = np.random.default_rng(5)
    buffer = bytearray(rng.integers(0, 256, 1024, np.uint8).tobytes())
    buffer[0:128] = bytes(128)  # zeros decode to a rank-1 map at address 0: refused
    buffer[320:448] = raw
    c = Capture()
    c.on_driver_exit("cuLaunchKernel", launch_record(b"nvjet_hsh_128x64_1x2_h_bz_TNT", buffer=bytes(buffer)))
    (launch,) = c.launches.values()
    assert launch.library == "cuBLAS" and launch.layout is None and len(launch.arguments) == 1024
    assert map_windows(launch.arguments) == [320]
    j = judge(c.events())
    (v,) = j.maps.values()
    assert v.launches[0].parameter is None and j.not_encoded() == [v]


def test_a_launch_with_no_map_lists_its_map_like_windows_in_the_report(tmp_path):
    """A packed buffer holding a map with its address left null (to be filled in later) and random words: no map,
    one map-like window at its offset, in the JSON and the Markdown."""
    null = bytes(8) + encode_bytes(spec_2d(), ADDRESS)[8:]
    rng = np.random.default_rng(6)
    buffer = bytearray(rng.integers(0, 256, 1024, np.uint8).tobytes())
    buffer[208:336] = null
    c = Capture()
    c.on_driver_exit("cuLaunchKernel", launch_record(b"sm90_xmma_fprop_implicit_gemm_x", buffer=bytes(buffer)))
    j = judge(c.events())
    assert not j.maps and j.near_maps == {0: [(208, "a map the driver would write but for its null address")]}
    write_report(tmp_path, j, c.counts, "prog")
    (launch,) = json.loads((tmp_path / "audit.json").read_text())["launches"]
    assert launch["near_maps"] == [{"offset": 208, "parameter": None, "why": j.near_maps[0][0][1]}]
    assert "@208: its null address" in (tmp_path / "audit.md").read_text()


def test_a_launch_without_a_layout_is_counted_unreadable_with_its_reason():
    c = Capture()
    c.on_driver_exit("cuLaunchKernel", launch_record(b"k", args=[bytes(8)]))
    c.on_driver_exit("cuLaunchKernel", launch_record(b"k", args=[bytes(8)]))
    (launch,) = c.launches.values()
    assert launch.arguments is None and "no parameter layout" in launch.unreadable and launch.count == 2
    assert sum(c.counts.unreadable_launches.values()) == 2


def test_a_map_edited_after_its_encode_is_listed_as_launched_but_never_encoded():
    spec = spec_2d()
    moved = encode_bytes(spec_2d(), ADDRESS + 4096)
    c = Capture(param_layout=lambda f: [(0, 128)])
    c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec))
    c.on_driver_exit("cuLaunchKernel", launch_record(b"k", args=[moved]))
    j = judge(c.events())
    assert [v.address for v in j.never_launched()] == [ADDRESS]
    assert [v.address for v in j.not_encoded()] == [ADDRESS + 4096]


def test_a_replaced_address_is_recorded():
    out = _keep(ctypes.create_string_buffer(encode_bytes(spec_2d(), ADDRESS + 256), 128))
    params = _keep(structs.ReplaceAddressParams(ctypes.addressof(out), ADDRESS + 256))
    c = Capture()
    c.on_driver_exit("cuTensorMapReplaceAddress", _callback("cuTensorMapReplaceAddress", params))
    (r,) = c.replaces
    assert r.address == ADDRESS + 256 and judge(c.events()).never_launched()[0].replaces == [r]


# ---- who called
def _frames_from(path: str):
    code = compile("def call(f):\n    return f()\n", path, "exec")
    scope: dict = {}
    exec(code, scope)
    return scope["call"](lambda: sys._getframe(1))


def test_the_library_is_read_from_the_python_frames_and_from_kernel_names():
    lib, user = caller_frames(_frames_from("/env/lib/python3.12/site-packages/triton/backends/driver.py"))
    assert lib == "triton" and user.startswith(__file__)
    assert caller_frames(_frames_from("/home/me/train.py"))[1].startswith("/home/me/train.py:2 in call")
    assert library_of_kernel("nvjet_sm90_tst_128x256") == "cuBLAS"
    assert library_of_kernel("sm90_xmma_fprop_implicit_gemm_cudnn") == "cuDNN"
    assert library_of_kernel("matmul_kernel") is None


# ---- what the judge says of a spec
def test_hazards_and_hints_name_the_edges_and_the_costs():
    spec = TensorMapSpec.create("float16", (300, 200), (128, 64), strides_bytes=(512, 2), element_strides=(1, 2),
                                base_address=ADDRESS)
    names = [h.split(":")[0] for h in hazards(spec)]
    assert names == ["ragged_edge", "ragged_edge", "padded_rows", "element_stride"]
    assert [h.split(":")[0] for h in hints(spec)] == ["no_swizzle", "no_l2_promotion"]
    clean = TensorMapSpec.create("float16", (256, 256), (64, 64), swizzle=3, l2_promotion=2, base_address=ADDRESS)
    assert hazards(clean) == [] and hints(clean) == []


def test_a_map_breaking_a_drvtma_rule_is_reported_with_the_rule():
    # overlapping rows: the driver takes it, drvtma's strides_overlap rule does not (without allow_overlap)
    spec = TensorMapSpec.create("float16", (16, 64), (8, 64), strides_bytes=(32, 2), base_address=ADDRESS,
                                allow_overlap=True)
    c = Capture()
    c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec))
    (v,) = judge(c.events()).maps.values()
    assert "strides_overlap" in v.rules and v.driver_written


# ---- streams, report, figures
def test_a_stream_round_trips_and_a_cut_one_keeps_what_was_seen(tmp_path):
    path = tmp_path / "events.jsonl"
    c = Capture(param_layout=lambda f: [(0, 128)])
    with path.open("w") as stream_file:  # streamed as the child runner does: each event when first seen
        c.sink = lambda event: stream_file.write(event_line(event))
        c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec_2d()))
        for _ in range(4):
            c.on_driver_exit("cuLaunchKernel", launch_record(b"k", args=[encode_bytes(spec_2d(), ADDRESS)]))
    streamed = path.read_text()
    c.counts.runtime_launches = 7
    path.write_text(streamed + final_line(c.launches.values(), c.counts))
    stream = load_events(path)
    assert stream.complete and stream.counts.runtime_launches == 7
    assert [(type(e).__name__, getattr(e, "count", None)) for e in stream.events] == [("Encode", None), ("Launch", 4)]
    assert stream.events[0].map_bytes == c.encodes[0].map_bytes
    path.write_text(streamed + final_line(c.launches.values(), c.counts)[:20])  # the program died mid-line
    cut = load_events(path)
    assert not cut.complete and cut.events[1].count == 1  # as first seen
    assert judge(cut.events).maps  # and judged all the same
    save_events(c.events(), c.counts, path)
    assert load_events(path).events[1].count == 4


def test_the_report_groups_by_library_and_draws_the_maps(tmp_path):
    spec = spec_2d()
    c = Capture(param_layout=lambda f: [(0, 128)])
    c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec))
    c.on_driver_exit("cuLaunchKernel", launch_record(b"k", args=[encode_bytes(spec, ADDRESS)]))
    j = judge(c.events())
    paths = write_report(tmp_path, j, c.counts, "python prog.py", pictures=True)
    assert [p.name for p in paths] == ["audit.json", "audit.md", "map1.svg"]
    data = json.loads(paths[0].read_text())
    assert data["maps"][0]["agrees_with_encode"] is True and data["maps"][0]["launched_by"][0]["parameter"] == 0
    text = paths[1].read_text()
    assert "ragged_edge" in text and "map1.svg" in text and "decoded spec agrees" in text
    (row,) = library_rows(j, c.counts)
    assert row["encodes"] == 1 and row["launch_maps"] == 1 and row["decoded"] == 1 and row["agree"] == 1
    assert figure_lines(j, c.counts)[0]["test"] == "audit"
    assert paths[2].read_text().startswith("<svg")


# ---- maps behind pointers (--follow-pointers)
def test_pointer_words_are_the_aligned_distinct_words_outside_the_maps():
    from drvtma.audit.follow import MAX_POINTERS, pointer_words

    words = [0x7F00_0000_1000, 0, 0x7F00_0000_1008, 0x7F00_0000_1000, 0x7F00_0000_2000]
    args = b"".join(w.to_bytes(8, "little") for w in words) + bytes(4)  # a trailing int is no word
    assert pointer_words(args) == [(0, 0x7F00_0000_1000), (32, 0x7F00_0000_2000)]  # 0, unaligned, repeated: out
    # a map's words are skipped (the repeat at 24 is then the first of its value)
    assert pointer_words(args, skip=[(0, 16)]) == [(24, 0x7F00_0000_1000), (32, 0x7F00_0000_2000)]
    many = b"".join((0x1000 * (i + 1)).to_bytes(8, "little") for i in range(2 * MAX_POINTERS))
    assert len(pointer_words(many)) == MAX_POINTERS


def test_maps_in_memory_are_read_at_64_byte_aligned_addresses_only():
    from drvtma.audit.follow import maps_in_memory
    from drvtma.tma.maps.findings import plausibility

    raw = encode_bytes(spec_2d(), ADDRESS)
    data = bytes(64) + raw + bytes(64) + bytes(range(256)) * 2
    plausible = lambda w: plausibility(w).plausible  # noqa: E731
    assert maps_in_memory(data, 0x7F00_0000_1000, plausible) == [(64, raw)]
    assert maps_in_memory(data, 0x7F00_0000_1010, plausible) == []  # the map would sit at ...1050: not 64-aligned
    assert maps_in_memory(bytes(16) + data, 0x7F00_0000_0FF0, plausible) == [(80, raw)]


def test_a_map_behind_a_pointer_is_launched_by_pointer_and_followed_once_per_distinct_launch(tmp_path):
    """A fake reader stands for the GPU: the map the program encoded is found 64 B past the pointer the kernel
    got, so it is launched (by pointer), not 'never launched'; repeats of a launch are not read again, a reader
    that raises leaves the launch recorded with the reason, and past the limit the launch says so."""
    spec = spec_2d()
    raw = encode_bytes(spec, ADDRESS)
    calls = []

    def follow(stream, arguments, skip):
        calls.append((stream, arguments))
        if arguments[:1] == b"\xff":
            raise RuntimeError("no such stream")
        pointer = int.from_bytes(arguments[:8], "little")
        return [{"offset": 0, "pointer": pointer, "delta": 64, "map": raw.hex()}], ""

    c = Capture(param_layout=lambda f: [(0, 8), (8, 4)], follow=follow)
    c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec))
    slot = (0x7F00_0000_1000).to_bytes(8, "little")
    for _ in range(3):
        c.on_driver_exit("cuLaunchKernel", launch_record(b"by_pointer", args=[slot, bytes(4)]))
    assert len(calls) == 1 and c.counts.errors == []
    c.on_driver_exit("cuLaunchKernel", launch_record(b"bad", args=[b"\xff" * 8, bytes(4)]))
    c.follow_limit = 2
    c.on_driver_exit("cuLaunchKernel", launch_record(b"late", args=[slot, (1).to_bytes(4, "little")]))
    by_kernel = {x.kernel: x for x in c.launches.values()}
    assert by_kernel["bad"].behind is None and "RuntimeError: no such stream" in by_kernel["bad"].behind_note
    assert by_kernel["late"].behind is None and "more than 2 distinct launches" in by_kernel["late"].behind_note
    j = judge(c.events())
    (v,) = j.maps.values()
    (use,) = v.launches
    assert (use.via, use.parameter, use.pointer, use.delta, use.launch.count) == ("pointer", 0, 0x7F00_0000_1000, 64, 3)
    assert v.agrees is True and not j.never_launched() and not j.not_encoded()
    paths = write_report(tmp_path, j, c.counts, "python prog.py")
    data = json.loads(paths[0].read_text())
    assert data["maps"][0]["launched_by"][0]["via"] == "pointer" and data["maps"][0]["launched_by"][0]["delta"] == 64
    assert data["libraries"][0]["maps_behind_pointers"] == 1
    assert "in global memory 64 B past the pointer 0x7f0000001000 of parameter 0" in paths[1].read_text()
    # the stream keeps what was read: a replay judges the same
    save_events(c.events(), c.counts, tmp_path / "events.jsonl")
    again = judge(load_events(tmp_path / "events.jsonl").events)
    assert [u.via for m in again.maps.values() for u in m.launches] == ["pointer"]


def test_the_pointer_reader_reads_device_memory_once_the_launch_ran_and_stops_after_a_slow_one(monkeypatch):
    """PointerReader over a fake driver (the real enums of cuda-bindings): it waits for the stream, keeps the map
    64 B past a pointer into a device allocation, skips a host pointer, leaves a capturing stream alone, and after
    one launch outruns its wait it follows no more."""
    import types

    from cuda.bindings import driver as real

    from drvtma.audit import follow

    ok, not_ready = real.CUresult.CUDA_SUCCESS, real.CUresult.CUDA_ERROR_NOT_READY
    raw = encode_bytes(spec_2d(), ADDRESS)
    null = bytes(8) + raw[8:]  # a map whose address is left for later
    device = {0x7F00_0000_0000: bytes(64) + raw + bytes(4096),  # one allocation: a map 64 B in
              0x7E00_0000_0000: bytes(1024) + null + bytes(64)}  # another: only map-like bytes, 1 KiB in
    state = {"busy": False, "capturing": False, "queries": 0}

    def query(stream):
        state["queries"] += 1
        return (not_ready if state["busy"] else ok,)

    def attributes(n, attrs, ptr):
        for start, data in device.items():
            if start <= ptr < start + len(data):
                return ok, [int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE), start, len(data)]
        return ok, [0, 0, 0]  # not a CUDA pointer: success, null attributes

    def copy(dst, src, n, stream):
        start = next(a for a in device if a <= src < a + len(device[a]))
        ctypes.memmove(dst, device[start][src - start:src - start + n], n)
        return (ok,)

    capture = real.CUstreamCaptureStatus
    fake = types.SimpleNamespace(
        CUresult=real.CUresult, CUstream=lambda s: s, CUstreamCaptureStatus=capture, cuStreamQuery=query,
        cuStreamIsCapturing=lambda s: (ok, capture.CU_STREAM_CAPTURE_STATUS_ACTIVE if state["capturing"] else
                                       capture.CU_STREAM_CAPTURE_STATUS_NONE),
        cuPointerGetAttributes=attributes, cuMemcpyDtoHAsync=copy)
    reader = follow.PointerReader()
    reader.cu = fake
    args = b"".join(p.to_bytes(8, "little") for p in (0x7F00_0000_0000, 0x5500_0000_0000, 0x7E00_0000_0000))
    found, note = reader(0, args)
    assert note == "" and found == [{"offset": 0, "pointer": 0x7F00_0000_0000, "delta": 64, "map": raw.hex()},
                                    {"offset": 16, "pointer": 0x7E00_0000_0000, "delta": 1024, "map": null.hex(),
                                     "near": "a map the driver would write but for its null address"}]
    launch = Launch(1, "cuLaunchKernel", "k", (1, 1, 1), (1, 1, 1), 0, args, None, None, "other", "", behind=found[1:])
    j = judge([launch])
    assert not j.maps and j.near_maps == {0: [(16, "1024 B past the pointer there: a map the driver would write "
                                                   "but for its null address")]}
    state["capturing"] = True
    assert reader(0, args) == (None, "not read: the stream is capturing a graph")
    state.update(capturing=False, busy=True)
    monkeypatch.setattr(follow, "WAIT_S", 0.01)
    assert "ran longer than" in reader(0, args)[1]
    queries = state["queries"]
    state["busy"] = False
    assert reader(0, args) == (None, reader.stopped) and "following stopped" in reader.stopped
    assert state["queries"] == queries  # no wait once stopped


def test_the_runner_and_the_command_line_pass_follow_pointers_on():
    from drvtma.audit.run import main as run_main
    from drvtma.cli.audit import child_command

    assert child_command(["python3", "x.py"], "ev", True) == ["python3", "-m", "drvtma.audit.run", "ev",
                                                               "--follow-pointers", "--", "x.py"]
    assert "--follow-pointers" not in child_command(["python3", "x.py"], "ev")
    assert run_main(["ev", "--follow-pointers"]) == 2  # no program after it: usage


# ---- the subscription through a fake cupti-python
def _fake_cupti(subscribe_error: Exception | None = None):
    from enum import IntEnum

    calls = {}
    mod = types.SimpleNamespace(
        driver_api_trace_cbid=IntEnum("d", {"cuTensorMapEncodeTiled": 697, "cuLaunchKernel": 307}),
        runtime_api_trace_cbid=IntEnum("r", {"cudaLaunchKernel_v7000": 211}),
        CallbackDomain=IntEnum("D", {"DRIVER_API": 1, "RUNTIME_API": 2, "RESOURCE": 3}),
        CallbackIdResource=IntEnum("R", {"MODULE_LOADED": 6}), cuptiError=RuntimeError)

    def subscribe(callback, userdata):
        if subscribe_error:
            raise subscribe_error
        calls["callback"] = callback
        return 42

    mod.subscribe = subscribe
    mod.enable_callback = lambda on, handle, domain, cbid: calls.setdefault("enabled", []).append((domain, cbid))
    mod.unsubscribe = lambda handle: calls.setdefault("unsubscribed", handle)
    package = types.ModuleType("cupti")
    package.cupti = mod
    return package, calls


def test_the_subscription_hands_cuptis_records_to_the_capture(monkeypatch):
    from drvtma.audit.session import Subscription

    package, calls = _fake_cupti()
    monkeypatch.setitem(sys.modules, "cupti", package)
    with Subscription() as sub:
        assert sorted(calls["enabled"]) == [(1, 307), (1, 697), (2, 211), (3, 6)]
        record = encode_record(spec_2d())
        calls["callback"](0, 1, 697, types.SimpleNamespace(ptr=record))  # cupti-python's object form
        calls["callback"](0, 1, 697, record)  # a bare address
        enter = _keep(structs.CallbackData(structs.API_ENTER))
        calls["callback"](0, 2, 211, ctypes.addressof(enter))
    assert len(sub.capture.encodes) == 2 and sub.capture.counts.runtime_launches == 1
    assert calls["unsubscribed"] == 42 and not sub.capture.counts.errors


@pytest.mark.parametrize("error, words", [
    (RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), "another CUPTI client"),
    (RuntimeError("CUDA driver is not found (libcuda.so.1: cannot open)"), "no CUDA driver"),
    (RuntimeError("CUPTI_ERROR_NOT_INITIALIZED"), "must match the driver"),
])
def test_the_subscription_refuses_in_one_sentence(monkeypatch, error, words):
    from drvtma.audit.session import Subscription

    package, _ = _fake_cupti(error)
    monkeypatch.setitem(sys.modules, "cupti", package)
    with pytest.raises(AuditError, match=words):
        Subscription()


def test_without_cupti_python_the_audit_says_what_to_install(monkeypatch):
    from drvtma.audit.session import Subscription

    monkeypatch.setitem(sys.modules, "cupti", None)
    with pytest.raises(AuditError, match="pip install cupti-python"):
        Subscription()


# ---- the command line
def _saved_stream(tmp_path, spec) -> str:
    c = Capture()
    c.on_driver_exit("cuTensorMapEncodeTiled", encode_record(spec))
    path = tmp_path / "events.jsonl"
    save_events(c.events(), Counts(), path)
    return str(path)


def test_replay_with_fail_on_exits_1_naming_the_rule(tmp_path, capsys):
    bad = TensorMapSpec.create("float16", (16, 64), (8, 64), strides_bytes=(32, 2), base_address=ADDRESS,
                               allow_overlap=True)
    events = _saved_stream(tmp_path, bad)
    report = str(tmp_path / "r")
    assert main(["audit", "--report", report, "--replay", events]) == 0
    assert main(["audit", "--report", report, "--replay", events, "--fail-on", "box_range"]) == 0
    capsys.readouterr()
    assert main(["audit", "--report", report, "--replay", events, "--fail-on", "strides_overlap"]) == 1
    assert "break strides_overlap" in capsys.readouterr().err
    assert main(["audit", "--report", report, "--replay", events, "--fail-on", "any"]) == 1


@pytest.mark.parametrize("argv, words", [
    (["audit"], "name the program after --"),
    (["audit", "--", "python"], "name the program after --"),
    (["audit", "--", "./a.out"], "is not a Python program"),
    (["audit", "--fail-on", "no_such_rule", "--", "python", "x.py"], "unknown rule(s) no_such_rule"),
    (["audit", "--replay", "/no/such/events.jsonl"], "is not a file"),
])
def test_usage_errors_are_one_line_and_status_2(argv, words, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and "Traceback" not in err


def test_a_replay_takes_no_follow_pointers(tmp_path, capsys):
    """A saved stream holds what its run read behind pointers: asking to follow them again is a usage error."""
    events = tmp_path / "events.jsonl"
    save_events([], Counts(), events)
    assert main(["audit", "--report", str(tmp_path / "r"), "--replay", str(events), "--follow-pointers"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--follow-pointers" in err and "\n" not in err


def test_where_the_audit_cannot_start_it_says_why_in_one_line_and_exits_3(tmp_path, capfd):
    program = tmp_path / "prog.py"
    program.write_text("print('ran')\n")
    status = main(["audit", "--report", str(tmp_path / "r"), "--", sys.executable, str(program)])
    err = capfd.readouterr().err.strip()
    # here: no GPU driver (or no cupti-python); on a GPU machine with cupti-python the audit runs
    if status == 3:
        assert err.startswith("drvtma audit: ") and "\n" not in err and "Traceback" not in err
    else:
        assert status == 0 and (tmp_path / "r" / "audit.md").exists()
