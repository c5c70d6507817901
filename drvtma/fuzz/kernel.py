"""Your kernel as a fuzz target: the callable contract (`LoadKernel`, `StoreKernel`), kernel references
("path/to/file.py:run"), the memory handed to a kernel, and what it returns checked and compared with the oracle.

drvtma draws the case (map, coordinates, data), calls your kernel once per case, and compares: loads box by box
with `drvtma.tma.tiled.oracle`, stores and reductions byte for byte over the tensor and the poisoned guards around it
with `drvtma.tma.stores`. The targets that use this are in `drvtma.fuzz.user`.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..errors import ArgumentError
from ..tma.stores import CHUNK_BYTES, smem_byte_offsets
from ..tma.tiled import oracle
from ..tma.tiled.rules import round_up
from ..tma.tiled.spec import TensorMapSpec

GUARD_BYTES = 512  # random poison before and after the tensor in `memory`: stray writes show up there
DIFF_LIMIT = 16


@runtime_checkable
class LoadKernel(Protocol):
    """Runs YOUR kernel's tiled loads for one case.

    - ``memory``: 1-D ``np.uint8``, ``GUARD_BYTES`` of random poison, the tensor's bytes (its extent rounded up to
      16; every element nonzero, so a load that delivers nothing differs), then poison again. Put all of it in
      device memory at a 16-byte aligned address (any fresh cudaMalloc / torch allocation is).
    - ``base``: where the tensor starts in ``memory`` (a multiple of 512): the map's global address.
    - ``spec``: the `TensorMapSpec` to load through, NumPy order (``shape``, ``strides_bytes``, ``box``,
      ``element_strides``, ``swizzle``, ``oob_fill``); ``base_address`` is None: use the device address + base.
    - ``coords``: ``np.int64`` of shape (n, rank), NumPy order: the box starts of n loads, inside, straddling an
      edge, negative or far outside.

    Return one of (a NumPy array on the host, e.g. ``tensor.cpu().numpy()``):

    - the boxes: shape ``(n, *spec.loaded_counts)``, any dtype of ``spec.itemsize`` bytes (its bits are compared);
      out-of-bounds elements hold the map's fill (zero or NaN) as TMA delivers it;
    - the shared-memory images: shape ``(n, spec.smem_bytes)``, ``np.uint8``, each as TMA wrote it at a
      1024-byte aligned shared address (swizzled; row padding is not compared).
    """

    def __call__(self, memory: np.ndarray, base: int, spec: TensorMapSpec, coords: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class StoreKernel(Protocol):
    """Runs YOUR kernel's tensor store (or reduction) of one box.

    - ``memory``, ``base``, ``spec``: as for `LoadKernel` (the tensor's initial contents between the guards);
    - ``coords``: ``np.int64`` of shape (rank,), NumPy order, never negative (the box may pass the far edges);
    - ``box``: the values to store, shape ``spec.loaded_counts``, the dtype's NumPy carrier (bfloat16 as uint16);
      put them in shared memory as a load of ``spec`` would have (drvtma.tma.stores.smem_from_box does);
    - ``op``: "store", or the reduction: "add", "min", "max", "inc", "dec", "and", "or", "xor".

    Return all of ``memory`` as it is in device memory afterwards: shape ``(memory.size,)``, 1 byte per item.
    """

    def __call__(self, memory: np.ndarray, base: int, spec: TensorMapSpec, coords: np.ndarray, box: np.ndarray,
                 op: str) -> np.ndarray: ...


class LoadCall(NamedTuple):
    """One call of a `LoadKernel`, as a batched kernel receives it (the same four arguments)."""

    memory: np.ndarray
    base: int
    spec: TensorMapSpec
    coords: np.ndarray


class StoreCall(NamedTuple):
    """One call of a `StoreKernel`, as a batched kernel receives it (the same six arguments)."""

    memory: np.ndarray
    base: int
    spec: TensorMapSpec
    coords: np.ndarray
    box: np.ndarray
    op: str


def batched(run):
    """Mark `run` as a batched kernel: drvtma calls it once per batch of cases with a list of `LoadCall` (or
    `StoreCall`) and takes back a list of results, one per call, each as the one-case protocol returns it. A kernel
    whose call costs more than its work (a synchronisation, a Python-side launch) launches them all, then waits once.
    """
    try:
        run.drvtma_batched = True
    except AttributeError:  # a bound method, a builtin: nothing to mark
        raise ArgumentError("kernel_reference", "run", type(run).__name__, "decorate a function or a callable "
                            "object of your own with @batched") from None
    return run


def is_batched(run) -> bool:
    return bool(getattr(run, "drvtma_batched", False))


def batch_results(results, n: int) -> list:
    """A batched kernel's return value checked: a sequence of n results."""
    if isinstance(results, np.ndarray) or not hasattr(results, "__len__") or len(results) != n:
        got = f"{type(results).__name__}" + (f" of {len(results)}" if hasattr(results, "__len__") else "")
        raise ArgumentError("kernel_result", "the batched kernel's return value", got,
                            f"return a list of {n} results, one per call, in the order of the calls")
    return list(results)


# ---------------------------------------------------------------------------------------------- references

_loaded: dict[str, object] = {}


def kernel_reference(run) -> str:
    """The text that names `run` in options and reproducers: "/abs/file.py:name" (a `drvtma repro` loads it
    again), or "<python>:qualname" for a callable no file can give back (a lambda, a closure)."""
    name = getattr(run, "__qualname__", "")
    try:
        path = inspect.getsourcefile(run)
    except TypeError:
        path = None
    ref = f"{Path(path).resolve()}:{name}" if path and name and "<" not in name else f"<python>:{name or id(run)}"
    _loaded[ref] = run
    return ref


def absolute_reference(ref: str) -> str:
    """`ref` with a file path made absolute (reproducers replay from any directory)."""
    if isinstance(ref, str) and ":" in ref:
        where, _, name = ref.rpartition(":")
        if where.endswith(".py"):
            return f"{Path(where).resolve()}:{name}"
    return ref


def load_kernel(ref: str):
    """The callable `ref` names: "path/to/file.py:name" (a path from the current directory; its folder goes on
    sys.path, so the file may import its neighbours) or "package.module:name"."""
    if ref in _loaded:
        return _loaded[ref]
    fix = 'give "path/to/file.py:name" or "package.module:name" (the callable that runs your kernel)'
    if not isinstance(ref, str) or ":" not in ref:
        raise ArgumentError("kernel_reference", "kernel", ref, fix)
    where, _, name = ref.rpartition(":")
    if where.startswith("<python>"):
        raise ArgumentError("kernel_reference", "kernel", ref, "give the callable from a file (file.py:name) to "
                            "replay it outside the Python process that found it", "an unnamed callable")
    if where.endswith(".py") or "/" in where or "\\" in where:  # a file (a module name has neither)
        path = Path(where).resolve()
        if not path.is_file():
            raise ArgumentError("kernel_reference", "kernel", ref, fix, f"no file {path}")
        module_name = f"drvtma_user_kernel_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:  # a file no module loader takes (not .py): say so, not a traceback
            raise ArgumentError("kernel_reference", "kernel", ref, fix, f"{path} is not a Python file")
        module = importlib.util.module_from_spec(spec)
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise ArgumentError("kernel_reference", "kernel", ref, fix, f"no module {where!r} ({exc})") from None
    run: object = module
    for part in name.split("."):
        run = getattr(run, part, None)
    if not callable(run):
        raise ArgumentError("kernel_reference", "kernel", ref, fix, f"{where} has no callable {name!r}")
    _loaded[ref] = run
    return run


# ---------------------------------------------------------------------------------------------- data

def tensor_region_bytes(spec: TensorMapSpec) -> int:
    return round_up(spec.extent_bytes, CHUNK_BYTES)


def load_memory(spec: TensorMapSpec, data_seed: int) -> np.ndarray:
    """Guard, tensor, guard: random bytes from the seed, the tensor's elements never zero."""
    rng = np.random.default_rng(data_seed)
    memory = rng.integers(0, 256, 2 * GUARD_BYTES + tensor_region_bytes(spec), dtype=np.uint8)
    elements = memory[GUARD_BYTES:GUARD_BYTES + tensor_region_bytes(spec)].view(f"u{spec.itemsize}")
    elements[elements == 0] = 1
    return memory


def store_memory(initial: np.ndarray, data_seed: int) -> np.ndarray:
    """Guard, the store case's initial tensor bytes, guard (the guards random from the seed)."""
    rng = np.random.default_rng([data_seed, 1])
    memory = rng.integers(0, 256, 2 * GUARD_BYTES + initial.size, dtype=np.uint8)
    memory[GUARD_BYTES:GUARD_BYTES + initial.size] = initial
    return memory


# ---------------------------------------------------------------------------------------------- results

def _as_host_array(result, what: str) -> np.ndarray:
    if isinstance(result, np.ndarray):
        return result
    try:
        return np.asarray(result)
    except Exception as exc:  # e.g. a CUDA tensor: NumPy cannot read device memory
        raise ArgumentError("kernel_result", what, type(result).__name__,
                            "return a NumPy array on the host (e.g. tensor.cpu().numpy())", str(exc)) from None


def load_result_boxes(result, spec: TensorMapSpec, n: int) -> np.ndarray:
    """What a LoadKernel returned, as the boxes' raw bits ((n, *loaded_counts), unsigned ints of itemsize)."""
    got = _as_host_array(result, "the kernel's return value")
    s, counts = spec.itemsize, spec.loaded_counts
    if got.shape == (n, *counts) and got.dtype.itemsize == s:
        return np.ascontiguousarray(got).view(f"u{s}")
    if got.shape == (n, spec.smem_bytes) and got.dtype.itemsize == 1:
        picked = np.ascontiguousarray(got).view(np.uint8)[:, smem_byte_offsets(spec)]  # (n, *counts, s)
        return np.ascontiguousarray(picked).view(f"u{s}").reshape((n, *counts))
    raise ArgumentError("kernel_result", "the kernel's return value", f"shape {got.shape}, dtype {got.dtype}",
                        f"return the boxes, shape {(n, *counts)} of any {s}-byte dtype ({spec.dtype.name}), or the "
                        f"shared-memory images, shape {(n, spec.smem_bytes)} of uint8")


def box_image(spec: TensorMapSpec, box_hex: str) -> np.ndarray:
    """A box's values (raw bits, hex: what a load case's outcome holds) placed where TMA puts them in shared memory:
    the image `show.failure` draws. Bytes no element lands on (row padding) stay 0, alike in expected and got."""
    values = np.frombuffer(bytes.fromhex(box_hex), np.uint8).reshape(*spec.loaded_counts, spec.itemsize)
    image = np.zeros(spec.smem_bytes, np.uint8)
    image[smem_byte_offsets(spec)] = values
    return image


def store_result_memory(result, memory: np.ndarray) -> np.ndarray:
    """What a StoreKernel returned, as the bytes of memory afterwards."""
    got = _as_host_array(result, "the kernel's return value")
    if got.shape != memory.shape or got.dtype.itemsize != 1:
        raise ArgumentError("kernel_result", "the kernel's return value", f"shape {got.shape}, dtype {got.dtype}",
                            f"return all of memory after the store: shape {memory.shape} of uint8")
    return np.ascontiguousarray(got).view(np.uint8)


def element_at(spec: TensorMapSpec, offset: int):
    """The tensor index (NumPy order) whose bytes hold byte `offset` from the base, or None (padding, outside)."""
    placed = []
    for axis in sorted(range(spec.rank), key=lambda a: -spec.strides_bytes[a]):
        i, offset = divmod(offset, spec.strides_bytes[axis])
        placed.append((axis, i))
    index = tuple(i for _, i in sorted(placed))
    if offset >= spec.itemsize or any(not 0 <= i < n for i, n in zip(index, spec.shape)):
        return None
    return index


def box_differences(spec: TensorMapSpec, coords: np.ndarray, got: np.ndarray, want: np.ndarray, box: int,
                    limit: int = DIFF_LIMIT) -> list[dict]:
    """The first differing elements of box `box`: offset (element, C order in the box), bits, where it sits."""
    assert spec.element_strides is not None  # __post_init__ fills it
    out = []
    width = 2 * spec.itemsize
    for flat in np.flatnonzero(got[box].reshape(-1) != want[box].reshape(-1))[:limit]:
        j = np.unravel_index(int(flat), spec.loaded_counts)
        g = [int(c) + int(k) * e for c, k, e in zip(coords[box], j, spec.element_strides)]
        inside = all(0 <= v < n for v, n in zip(g, spec.shape))
        out.append({"offset": int(flat), "expected": f"0x{int(want[box].reshape(-1)[flat]):0{width}x}",
                    "got": f"0x{int(got[box].reshape(-1)[flat]):0{width}x}",
                    "where": f"box {box}, element {tuple(int(v) for v in j)}, tensor index {tuple(g)}"
                             + ("" if inside else " (out of bounds: the fill)")})
    return out


def memory_differences(spec: TensorMapSpec, got: np.ndarray, want: np.ndarray, limit: int = DIFF_LIMIT):
    """The first differing bytes of memory: offset from the tensor base, and the element or guard they are in."""
    end = GUARD_BYTES + tensor_region_bytes(spec)
    out = []
    for pos in np.flatnonzero(got != want)[:limit]:
        rel = int(pos) - GUARD_BYTES
        if pos < GUARD_BYTES or pos >= end:
            where = "guard before the tensor" if pos < GUARD_BYTES else "guard after the tensor"
        else:
            index = element_at(spec, rel)
            where = f"tensor index {index}" if index is not None else "tensor padding (no element)"
        out.append({"offset": rel, "expected": f"0x{int(want[pos]):02x}", "got": f"0x{int(got[pos]):02x}",
                    "where": where})
    return out


def expected_boxes(spec: TensorMapSpec, memory: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """The oracle's boxes for a LoadKernel's case (raw bits, as `load_result_boxes` gives the kernel's: an int8 /
    int16 spec's signed values go back to their map type's unsigned bits)."""
    want = oracle.box_values(spec, memory[GUARD_BYTES:GUARD_BYTES + tensor_region_bytes(spec)], coords)
    return want.view(spec.dtype.map_type.numpy) if spec.dtype.is_view else want
