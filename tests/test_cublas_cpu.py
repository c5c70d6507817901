"""drvtma.gemm.cublas's cuBLASLt backend on the CPU, against a stand-in for nvmath-python's typed bindings
(`nvmath.bindings.cublasLt` 1.0: its enums, MatmulHeuristicResult, MatmulAlgo, cuBLASLtError and the attribute
type tables, with the values of the real ones). The real library needs a GPU: tests/test_gemm_gpu.py."""

from __future__ import annotations

import ctypes
import enum
import sys
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

from drvtma.gemm import cublas as cublas_mod
from drvtma.gemm.cublas import CublasUnsupported, LtGemm

NOT_SUPPORTED, INVALID_VALUE = 15, 7
E5M2 = 29
ALGO_DTYPE = np.dtype([("data_", "<u8", (8,))])
HEURISTIC_DTYPE = np.dtype([("algo", ALGO_DTYPE), ("workspace_size", "<u8"), ("state", "<i4"),
                            ("waves_count", "<f4"), ("reserved", "<i4", (4,))])
ALGO_WORDS = {"ID": 66, "TILE_ID": 24, "SPLITK_NUM": 1, "STAGES_ID": 35, "CLUSTER_SHAPE_ID": 3}  # a word each


class _Structs:
    """nvmath's struct arrays: `size` structs of `dtype` in memory of their own, `.ptr` their address."""

    def __init__(self, data):
        self._data = data
        self.ptr = data.ctypes.data


class MatmulHeuristicResult(_Structs):
    def __init__(self, size=1):
        super().__init__(np.zeros(size, HEURISTIC_DTYPE))
        assert HEURISTIC_DTYPE.itemsize == 96  # cublasLtMatmulHeuristicResult_t

    def __getitem__(self, i):
        return SimpleNamespace(algo=self._data[i:i + 1]["algo"])


class MatmulAlgo(_Structs):
    @staticmethod
    def from_data(data):
        assert data.dtype == ALGO_DTYPE and data.shape == (1,)
        return MatmulAlgo(data)


class cuBLASLtError(Exception):  # noqa: N801 - nvmath's name
    def __init__(self, status):
        self.status = status
        super().__init__(f"status {status}")


def fake_nvmath():
    """(nvmath, nvmath.bindings.cublas, nvmath.bindings.cublasLt) stand-ins; lt.calls records every call."""
    lt = ModuleType("nvmath.bindings.cublasLt")
    lt.calls, lt.live = [], set()
    lt.cuBLASLtError, lt.MatmulHeuristicResult, lt.MatmulAlgo = cuBLASLtError, MatmulHeuristicResult, MatmulAlgo
    lt.MatmulDescAttribute = enum.IntEnum("MatmulDescAttribute", {"TRANSA": 3, "TRANSB": 4, "FAST_ACCUM": 25})
    lt.MatmulPreferenceAttribute = enum.IntEnum("MatmulPreferenceAttribute", {"MAX_WORKSPACE_BYTES": 1})
    lt.MatmulAlgoConfigAttribute = enum.IntEnum("MatmulAlgoConfigAttribute", {
        "ID": 0, "TILE_ID": 1, "SPLITK_NUM": 2, "STAGES_ID": 6, "CLUSTER_SHAPE_ID": 8})
    lt.MatmulTile = enum.IntEnum("MatmulTile", {"TILE_128x256": 23, "TILE_256x128": 24})
    lt.MatmulStages = enum.IntEnum("MatmulStages", {"STAGES_64xAUTO": 35})
    lt.ClusterShape = enum.IntEnum("ClusterShape", {"SHAPE_2x1x1": 3})
    lt.get_matmul_desc_attribute_dtype = {3: np.int32, 4: np.int32, 25: np.int8}.__getitem__
    lt.get_matmul_preference_attribute_dtype = {1: np.uint64}.__getitem__
    lt.get_matmul_algo_config_attribute_dtype = {0: np.int32, 1: np.uint32, 2: np.int32, 6: np.uint32,
                                                 8: np.uint16}.__getitem__
    lt.get_version = lambda: 130100
    lt.fail_heuristic, lt.algorithms = {}, 8  # in type -> status; how many algorithms the heuristic finds

    def make(kind):
        def create(*args):
            lt.calls.append((kind + "_create", args))
            handle = len(lt.calls) * 16
            lt.live.add(handle)
            return handle
        return create

    def destroy(handle):
        lt.live.remove(handle)

    lt.create = make("handle")
    lt.matmul_desc_create, lt.matrix_layout_create = make("desc"), make("layout")
    lt.matmul_preference_create = make("pref")
    lt.destroy = lt.matmul_desc_destroy = lt.matrix_layout_destroy = lt.matmul_preference_destroy = destroy

    def set_attribute(kind):
        def set_(obj, attr, buf, size):
            raw = ctypes.string_at(buf, size)
            lt.calls.append((kind, (int(attr), size, int.from_bytes(raw, "little"))))
        return set_

    lt.matmul_desc_set_attribute = set_attribute("desc_set")
    lt.matmul_preference_set_attribute = set_attribute("pref_set")

    def get_heuristic(handle, desc, la, lb, lc, ld, pref, requested, results, count):
        in_t = [args[0] for kind, args in lt.calls if kind == "layout_create"][0]
        if in_t in lt.fail_heuristic:
            raise cuBLASLtError(lt.fail_heuristic[in_t])
        words = (ctypes.c_uint64 * 12 * requested).from_address(results)
        for word, value in enumerate(ALGO_WORDS.values()):
            words[0][word] = value
        ctypes.c_int32.from_address(count).value = min(lt.algorithms, requested)

    def algo_config_get_attribute(algo, attr, buf, size, written):
        word = list(ALGO_WORDS).index(lt.MatmulAlgoConfigAttribute(attr).name)
        value = np.array([(ctypes.c_uint64 * 8).from_address(algo)[word]]).astype(
            lt.get_matmul_algo_config_attribute_dtype(attr))
        assert value.itemsize == size
        ctypes.memmove(buf, value.ctypes.data, size)

    lt.matmul_algo_get_heuristic = get_heuristic
    lt.matmul_algo_config_get_attribute = algo_config_get_attribute
    lt.matmul = lambda *args: lt.calls.append(("matmul", args))
    cublas = ModuleType("nvmath.bindings.cublas")
    cublas.Status = enum.IntEnum("Status", {"NOT_SUPPORTED": NOT_SUPPORTED, "INVALID_VALUE": INVALID_VALUE})
    cublas.ComputeType = enum.IntEnum("ComputeType", {"COMPUTE_32F": 68})
    cublas.Operation = enum.IntEnum("Operation", {"N": 0, "T": 1})
    nvmath = ModuleType("nvmath")
    nvmath.__version__ = "1.0.0"
    nvmath.CudaDataType = enum.IntEnum("CudaDataType", {"CUDA_R_32F": 0, "CUDA_R_16F": 2, "CUDA_R_16BF": 14,
                                                        "CUDA_R_8F_E4M3": 28, "CUDA_R_8F_E5M2": E5M2})
    nvmath.bindings = ModuleType("nvmath.bindings")
    nvmath.bindings.cublas, nvmath.bindings.cublasLt = cublas, lt
    return nvmath, cublas, lt


@pytest.fixture()
def lt(monkeypatch):
    import drvtma.runtime.driver as driver

    nvmath, cublas, lt = fake_nvmath()
    for name, module in (("nvmath", nvmath), ("nvmath.bindings", nvmath.bindings),
                         ("nvmath.bindings.cublas", cublas), ("nvmath.bindings.cublasLt", lt)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(driver, "context", lambda: None)
    monkeypatch.setattr(driver, "DeviceBuffer", lambda n: SimpleNamespace(ptr=0xD000, nbytes=n, close=lambda: None))
    return lt


def buffers():
    return SimpleNamespace(ptr=0xA000), SimpleNamespace(ptr=0xB000), SimpleNamespace(ptr=0xC000)


def test_a_plan_sets_typed_attributes_and_runs_heuristic_zero(lt):
    """TN with fp32 compute; each attribute in its C type (FAST_ACCUM is an int8_t: given as 4 bytes, cuBLASLt
    refused it on the H200); the algorithm is a copy of heuristic #0, named by nvmath's enums."""
    gemm = LtGemm()
    launch = gemm.plan(*buffers(), 128, 256, 64, "float8_e4m3fn", "bfloat16", alpha=0.5)
    assert ("desc_create", (68, 0)) in lt.calls
    sets = [args for kind, args in lt.calls if kind == "desc_set"]
    assert sets == [(3, 4, 1), (4, 4, 0), (25, 1, 1)]  # TRANSA = T, TRANSB = N, FAST_ACCUM = 1 in one byte
    assert [args for kind, args in lt.calls if kind == "pref_set"] == [(1, 8, 32 << 20)]
    assert [args for kind, args in lt.calls if kind == "layout_create"] == [(28, 64, 256, 64), (28, 64, 128, 64),
                                                                          (14, 256, 128, 256)]
    assert gemm.describe().endswith("heuristic #0: id 66, tile_id 24 (TILE_256x128), stages_id 35 (STAGES_64xAUTO), "
                                    "splitk_num 1, cluster_shape_id 3 (SHAPE_2x1x1)")
    assert "cuBLASLt 130100, nvmath-python 1.0.0" in gemm.describe()
    launch()
    args = [a for kind, a in lt.calls if kind == "matmul"][0]
    algo = launch.keep[4]
    assert args[3] == 0xB000 and args[5] == 0xA000 and args[8] == args[10] == 0xC000  # B as cuBLAS's A
    assert args[12] == algo.ptr and (ctypes.c_uint64 * 8).from_address(algo.ptr)[0] == 66
    assert args[13:] == (0xD000, 32 << 20, 0)
    launch.release()
    gemm.close()
    assert not lt.live  # descriptors, layouts, preference and handle all destroyed


def test_bf16_plans_have_no_fast_accumulation(lt):
    LtGemm().plan(*buffers(), 64, 64, 64, "bfloat16", "bfloat16")
    assert [args[0] for kind, args in lt.calls if kind == "desc_set"] == [3, 4]


def test_not_supported_is_its_own_error_and_other_statuses_pass_through(lt):
    gemm = LtGemm()
    lt.fail_heuristic[E5M2] = NOT_SUPPORTED
    with pytest.raises(CublasUnsupported, match="float8_e5m2->bfloat16 64x64x64.*NOT_SUPPORTED"):
        gemm.plan(*buffers(), 64, 64, 64, "float8_e5m2", "bfloat16")
    lt.fail_heuristic[E5M2] = INVALID_VALUE
    with pytest.raises(cuBLASLtError) as caught:
        gemm.plan(*buffers(), 64, 64, 64, "float8_e5m2", "bfloat16")
    assert caught.value.status == INVALID_VALUE and not isinstance(caught.value, CublasUnsupported)
    lt.fail_heuristic.clear()
    lt.algorithms = 0
    with pytest.raises(CublasUnsupported, match="no algorithm"):
        gemm.plan(*buffers(), 64, 64, 64, "bfloat16", "bfloat16")
    gemm.close()
    assert not lt.live  # a refused plan leaves nothing behind


def test_cublaslt_algorithm_fields_are_named_by_nvmaths_enums():
    from drvtma.gemm.cublas import _enum_name

    Tile = enum.IntEnum("MatmulTile", {"TILE_128x256": 23, "TILE_256x128": 24})
    lt = SimpleNamespace(MatmulTile=Tile)
    assert _enum_name(lt, "TILE_ID", 24) == " (TILE_256x128)"
    assert _enum_name(lt, "TILE_ID", 999) == "" and _enum_name(lt, "STAGES_ID", 3) == ""
    assert _enum_name(lt, "ID", 66) == ""


def test_kernel_names_are_skipped_when_the_setting_says_so(monkeypatch):
    monkeypatch.setenv("DRVTMA_CUBLAS_KERNEL_NAMES", "0")
    assert cublas_mod.kernel_names(lambda: pytest.fail("profiled")) == []


def test_closing_releases_plans_workspace_and_handle_even_if_one_fails(lt, monkeypatch):
    """LtGemm is on the one lifecycle (runtime.driver.Resource): a plan never released, the workspace and the handle
    are all released by close() though the handle's destroy fails; the error is raised after; a second close and
    the collector do nothing more."""
    import gc

    import drvtma.runtime.driver as driver

    closed = []

    class Workspace:  # closes once, as a DeviceBuffer does
        ptr = 0xD000

        def __init__(self, n):
            self.n = n

        def close(self):
            if self.n not in closed:
                closed.append(self.n)

    monkeypatch.setattr(driver, "DeviceBuffer", Workspace)
    gemm = LtGemm()
    handle = gemm.handle
    gemm.plan(*buffers(), 64, 64, 64, "bfloat16", "bfloat16")  # never released by its caller
    released = lt.destroy

    def destroy(h):
        released(h)
        if h == handle:
            raise cuBLASLtError(INVALID_VALUE)

    lt.destroy = destroy
    gemm._finalizer = None  # own the handle again through the failing destroy
    gemm._own_library(lt.destroy, handle)
    with pytest.raises(cuBLASLtError):
        with gemm:
            pass
    assert not lt.live and closed == [32 << 20] and gemm.closed
    gemm.close()
    del gemm
    gc.collect()
    assert closed == [32 << 20]


def test_a_plan_refused_halfway_leaks_nothing(lt):
    """A layout the library refuses after the descriptor and the first layout were made: both released."""
    gemm = LtGemm()
    create = lt.matrix_layout_create

    def second_fails(*args):
        if len([c for c in lt.calls if c[0] == "layout_create"]) == 1:
            raise cuBLASLtError(INVALID_VALUE)
        return create(*args)

    lt.matrix_layout_create = second_fails
    with pytest.raises(cuBLASLtError):
        gemm.plan(*buffers(), 64, 64, 64, "bfloat16", "bfloat16")
    gemm.close()
    assert not lt.live


def test_a_released_plan_is_released_once(lt):
    gemm = LtGemm()
    launch = gemm.plan(*buffers(), 64, 64, 64, "bfloat16", "bfloat16")
    launch.release()
    launch.close()  # the same release: nothing left to do (the fake's destroy refuses a handle twice)
    gemm.close()
    gemm.close()
    assert not lt.live
