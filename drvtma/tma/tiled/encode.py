"""Encoding: `encode_tiled` (checked) and `encode_unchecked` to the 128-byte `TensorMap` a kernel takes by value.

Host cost is part of the contract (a map per launch must stay cheap): a spec seen before costs one dict lookup, the
address checks and the driver call; a new geometry adds `_geometry_holds` (the quick test of every rule in
`rules.RULES`, the table validate_all runs too) and the driver's arguments, built once per geometry. Only a spec that
fails a quick test goes through validate_all, for the error and its fix.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Callable, cast

import numpy as np

from ...errors import CudaError, TensorMapError, as_int, is_int
from ...errors import address as as_address
from ...runtime import driver
from ...runtime.driver import DeviceBuffer
from ..arrays import array_layout, is_array
from ..params import MapParams
from .rules import RULES, address_error, bounds_error, validate_all
from .spec import SMEM_PER_BLOCK_OPTIN_SM90, TENSOR_MAP_BYTES, Interleave, TensorMapSpec, TmaParams

if TYPE_CHECKING:  # im2col.encode builds TensorMaps too
    from ..im2col.spec import Im2colSpec


def _resolve_target(base_address: int | None, target) -> tuple[int, object, int | None]:
    """(address, object to keep alive, bytes available from the address) for an encode or replace target."""
    if target is None:
        if base_address is None:
            raise TensorMapError("address_missing", "target", None, "give a DeviceBuffer, a device array or an "
                                 "address, or set the spec's base_address", "the map needs a global address")
        return base_address, None, None
    if is_int(target) or isinstance(target, str):
        return as_address(target, "target", error=TensorMapError), None, None
    if hasattr(target, "ptr") and hasattr(target, "nbytes") and not hasattr(target, "__dlpack__"):
        if getattr(target, "closed", False):
            raise TensorMapError("target_closed", "target", repr(target), "encode for an open DeviceBuffer")
        ptr = as_address(target.ptr, "target.ptr", error=TensorMapError)
        nbytes = as_int(target.nbytes, "target.nbytes", error=TensorMapError, rule="type", lo=0)
        # A spec made by from_buffer(buf, offset_bytes=...) points inside the buffer: keep that offset.
        if base_address is not None and ptr <= base_address < ptr + nbytes:
            return base_address, target, ptr + nbytes - base_address
        return ptr, target, nbytes
    if is_array(target):  # torch, CuPy, JAX, cuda.core: the map may reach as far as the array does
        layout = array_layout(target)
        if layout.address is None:
            raise TensorMapError("target_host", "target", type(target).__name__, "copy the array to the device "
                                 "(a DeviceBuffer, torch, CuPy, ...)", "it is in host memory; a tensor map needs "
                                 "device memory")
        return layout.address, target, layout.extent_bytes
    raise TensorMapError("type", "target", type(target).__name__, "give a DeviceBuffer, a device array (DLPack / "
                         "CUDA Array Interface), an int address or None (the spec's base_address)",
                         "not an encode target")


def encode_tiled(spec: TensorMapSpec, target=None, *, validate: bool = True,
                 smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> TensorMap:
    """Validate `spec` and encode it with cuTensorMapEncodeTiled.

    Parameters
    ----------
    spec : TensorMapSpec
        The map, NumPy order (outermost axis first).
    target : DeviceBuffer, device array, int or None
        What the map points at; None: the spec's base_address.
    validate : bool
        Check every rule of `RULES` first (False: only what the driver itself refuses stops it).
    smem_limit : int
        The shared memory a box may take (the sm_90 opt-in limit by default).

    Returns
    -------
    TensorMap
        The 128 encoded bytes, to pass by value (`const __grid_constant__`) or copy to global memory.

    Raises
    ------
    TensorMapError
        A broken rule, named, with the argument, its value and the fix (before the driver).
    NoGpuError
        No driver or no GPU with TMA.
    CudaError
        The driver refused what the rules let through (its own error code and call named)."""
    if not isinstance(spec, TensorMapSpec):
        raise TensorMapError("type", "spec", type(spec).__name__, "give a TensorMapSpec (TensorMapSpec.create, "
                             "from_dict, for_array)", "encode_tiled encodes specs")
    address: int
    keepalive: object
    available: int | None
    if type(target) is DeviceBuffer:  # the common case first; any other target goes the long way
        if target.closed:
            raise TensorMapError("target_closed", "target", repr(target), "encode for an open DeviceBuffer")
        address, keepalive, available = target.ptr, target, target.nbytes
        if spec.base_address is not None and address <= spec.base_address < address + available:
            address, available = spec.base_address, address + available - spec.base_address
    else:
        address, keepalive, available = _resolve_target(spec.base_address, target)
    if validate and address % (32 if spec.interleave == Interleave.B32 else 16):  # address_error's test, inlined
        raise cast(TensorMapError, address_error(address, spec.interleave))
    if smem_limit is not SMEM_PER_BLOCK_OPTIN_SM90:
        smem_limit = as_int(smem_limit, "smem_limit", error=TensorMapError, rule="type", lo=0)
    try:
        geometry = _geometry(spec, smem_limit if validate else None)
    except _Unrepresentable as exc:
        raise CudaError("cuTensorMapEncodeTiled", -1, "REFUSED_BY_CUDA_PYTHON", str(exc),
                        _every_argument(spec.tma_params(), address, spec)) from None
    if validate and geometry.packed and address % 32:  # Blackwell's packed types want 32 B (rules.address_error)
        raise cast(TensorMapError, address_error(address, spec.interleave, spec.dtype))
    if validate and available is not None and geometry.extent > available:
        raise cast(TensorMapError, bounds_error(spec, available))  # the extent bounds_error tests
    return _encode(geometry, address, spec, keepalive)


class _Unrepresentable(Exception):
    """cuda-python cannot hold one of the driver arguments (only reachable with validate=False)."""


class _Geometry:
    """Everything of one geometry (a spec less its address) that an encode needs, built once."""

    __slots__ = ("spec", "args", "extent", "packed", "_params")

    def __init__(self, spec: TensorMapSpec, extent: int | None = None):
        u32s, u64, enums = _driver_values()
        shape, strides = spec.shape, spec.strides_bytes
        assert spec.element_strides is not None  # __post_init__ fills it
        self.spec, self.packed = spec, bool(spec.dtype.bits)
        # spec.extent_bytes (as the geometry check found it), without the cached_property's lock
        self.extent = extent if extent is not None else (
            spec.extent_bytes if spec.dtype.bits or min(shape) <= 0 else
            sum((n - 1) * s for n, s in zip(shape, strides)) + spec.dtype.itemsize)
        dtype, interleave, swizzle, l2, fill = enums(spec.dtype.enum, spec.interleave, spec.swizzle,
                                                     spec.l2_promotion, spec.oob_fill)
        # the driver's order is the reverse of NumPy's (spec.to_tma_order); rank 1 gets the one dummy stride it wants
        self.args = (dtype, u32s((len(shape),))[0], [u64(v) for v in shape[::-1]],
                     [u64(v) for v in strides[-2::-1]] or [u64(16)], u32s(spec.box), u32s(spec.element_strides),
                     interleave, swizzle, l2, fill)  # the driver's arguments but the address (the third)
        self._params: TmaParams | None = None

    @property
    def params(self) -> TmaParams:
        if self._params is None:
            self._params = self.spec.tma_params()
        return self._params


_values: tuple[Callable[[tuple], list], Any, Callable[..., tuple]] | None = None


def _driver_values() -> tuple[Callable[[tuple], list], Any, Callable[..., tuple]]:
    """(u32s, u64, enums): the driver's order (reversed) of a box-like tuple as a list of cuuint32_t, made once per
    tuple; cuuint64_t; and the five enum members of a geometry (dtype, interleave, swizzle, L2 promotion, fill)."""
    global _values
    if _values is None:
        from cuda.bindings import driver as cu

        u32_lists: dict[tuple, list] = {}

        def u32s(values: tuple) -> list:
            x = u32_lists.get(values)
            if x is None:
                x = [cu.cuuint32_t(v) for v in values[::-1]]  # shared by geometries, never changed
                if len(u32_lists) < 4096:
                    u32_lists[values] = x
            return x

        kinds = (cu.CUtensorMapDataType, cu.CUtensorMapInterleave, cu.CUtensorMapSwizzle, cu.CUtensorMapL2promotion,
                 cu.CUtensorMapFloatOOBfill)
        members: dict[tuple, tuple] = {}

        def enums(*values):
            x = members.get(values)  # IntEnum members hash and compare as their ints
            if x is None:
                x = tuple(kind(int(v)) for kind, v in zip(kinds, values))  # an unknown value: ValueError here
                if len(members) < 1024:
                    members[values] = x
            return x

        _values = (u32s, cu.cuuint64_t, enums)
    return _values


# A map is often re-encoded for new addresses with the same geometry: geometries (checked, or not) are remembered.
_geometries: dict[tuple, _Geometry] = {}


def _geometry(spec: TensorMapSpec, smem_limit: int | None) -> _Geometry:
    """The geometry of `spec`, checked against every rule but the address unless smem_limit is None."""
    memo = spec.__dict__.get("_drvtma_geometry")  # the same spec object encoded again (a memo, not a field)
    if memo is not None and memo[0] == smem_limit:
        return memo[1]
    key = (spec.dtype.enum, spec.shape, spec.strides_bytes, spec.box, spec.element_strides, int(spec.interleave),
           int(spec.swizzle), int(spec.l2_promotion), int(spec.oob_fill), spec.allow_overlap,
           spec.allow_undocumented, spec.target, smem_limit)
    geometry = _geometries.get(key)
    if geometry is None:
        extent = None
        open_for_default_target(spec)
        if smem_limit is not None:
            extent = _geometry_holds(spec, smem_limit)
            if extent is None:
                errors = validate_all(spec.replace(base_address=None), smem_limit=smem_limit)  # the address: ours
                if errors:
                    raise errors[0]
        try:
            geometry = _Geometry(spec, extent)
        except (ValueError, TypeError, OverflowError) as exc:
            raise _Unrepresentable(str(exc)) from None
        if len(_geometries) >= 4096:
            _geometries.clear()
        _geometries[key] = geometry
    spec.__dict__["_drvtma_geometry"] = (smem_limit, geometry)
    return geometry


# rules.RULES split by what each reads: the form (rank, enums) and the box's rules, remembered per box and form (maps
# of one box often differ only in shape); then shape and strides. The address is encode's own check.
_BOX = tuple(rule.holds for rule in RULES if rule.scope in ("form", "box"))
_LAYOUT = tuple(rule.holds for rule in RULES if rule.scope == "layout")
_boxes: dict[tuple, bool] = {}


def _geometry_holds(spec: TensorMapSpec, smem_limit: int) -> int | None:
    """The tensor's extent in bytes if every rule of rules.RULES but the address holds, else None (then
    validate_all names the rule). Runs the rules' quick tests only."""
    # Every field the form and box rules read. Enums compare as their ints, but a spec holds an in-range value only
    # as its member (TensorMapSpec normalises), so a key never mixes a member with a raw int.
    box_key = (spec.dtype.enum, spec.box, spec.element_strides, len(spec.shape), len(spec.strides_bytes),
               spec.interleave, spec.swizzle, spec.l2_promotion, spec.oob_fill, spec.allow_undocumented, spec.target,
               smem_limit)
    box_ok = _boxes.get(box_key)
    if box_ok is None:
        if len(_boxes) >= 4096:
            _boxes.clear()
        box_ok = True
        for holds in _BOX:  # in table order: the form first, every later test assumes it
            if not holds(spec, smem_limit):
                box_ok = False
                break
        _boxes[box_key] = box_ok
    if not box_ok:
        return None
    for holds in _LAYOUT:
        if not holds(spec, smem_limit):
            return None
    shape, strides = spec.shape, spec.strides_bytes
    extent = strides[-1]  # the element size, as the rules found
    for i in range(len(shape)):
        extent += (shape[i] - 1) * strides[i]
    return extent if not spec.dtype.bits else spec.extent_bytes  # packed: the innermost axis holds bits / 8 B


_encode_call: Callable[..., Any] | None = None  # cuTensorMapEncodeTiled, once the driver is open
_SUCCESS = 0


def open_for_default_target(spec) -> None:
    """A map using a Blackwell feature (packed type, swizzle atom) without a target of its own is checked for the
    open context's device (targets.spec_target): open the context first, else the check answers for sm_90a."""
    if _encode_call is None and getattr(spec, "target", None) is None and (spec.dtype.bits or spec.swizzle > 3):
        _open_driver()


def _open_driver() -> None:
    """The context once (cuInit); then the binding itself, no wrapper."""
    global _encode_call
    from cuda.bindings import driver as cu

    driver.context()
    _encode_call = cu.cuTensorMapEncodeTiled


def _encode(geometry: _Geometry | _ParamsOnly, address: int, spec: TensorMapSpec | None, keepalive) -> TensorMap:
    if _encode_call is None:
        _open_driver()
    assert _encode_call is not None  # _open_driver set it
    a = geometry.args
    try:
        code, encoded = _encode_call(a[0], a[1], address, a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9])
    except (ValueError, TypeError, OverflowError) as exc:
        raise CudaError("cuTensorMapEncodeTiled", -1, "REFUSED_BY_CUDA_PYTHON", str(exc),
                        _every_argument(geometry.params, address, spec)) from None
    if code != _SUCCESS:
        from ...runtime.driver import cuda_error

        e = cuda_error("cuTensorMapEncodeTiled", code)
        raise CudaError(e.call, e.code, e.name, e.description, _every_argument(geometry.params, address, spec))
    return TensorMap(encoded, None, address, spec=spec, keepalive=keepalive, geometry=geometry)


def _every_argument(params: TmaParams, address: int, spec: TensorMapSpec | None) -> str:
    """Built only for an error: describing costs more than encoding."""
    where = f"arguments: {params.describe()}, globalAddress=0x{address:x}"
    return where + (f"\nspec (NumPy order): {spec.to_dict()}" if spec is not None else "")


class _ParamsOnly:
    """A geometry from raw driver arguments (encode_unchecked: values drvtma's rules might refuse)."""

    __slots__ = ("args", "params")

    def __init__(self, params: TmaParams):
        from cuda.bindings import driver as cu

        u32, u64 = cu.cuuint32_t, cu.cuuint64_t
        self.params = params
        self.args = (cu.CUtensorMapDataType(params.dtype_enum), u32(params.rank),
                     [u64(v) for v in params.global_dim], [u64(v) for v in params.global_strides],
                     [u32(v) for v in params.box_dim], [u32(v) for v in params.element_strides],
                     cu.CUtensorMapInterleave(params.interleave), cu.CUtensorMapSwizzle(params.swizzle),
                     cu.CUtensorMapL2promotion(params.l2_promotion), cu.CUtensorMapFloatOOBfill(params.oob_fill))


def encode_unchecked(params: TmaParams, address: int, *, spec: TensorMapSpec | None = None,
                     keepalive=None) -> TensorMap:
    """Encode exactly these driver arguments, with none of drvtma's checks (the validator-vs-driver test).

    A refusal raises CudaError listing every argument; values cuda-python cannot even represent (an enum out of
    range, a negative stride, rank > 5) raise CudaError too, with code -1 and the bindings' message.
    """
    try:
        geometry = _ParamsOnly(params)
    except (ValueError, TypeError, OverflowError) as exc:
        raise CudaError("cuTensorMapEncodeTiled", -1, "REFUSED_BY_CUDA_PYTHON", str(exc),
                        _every_argument(params, address, spec)) from None
    tmap = _encode(geometry, int(address), spec, keepalive)
    tmap._params = params
    return tmap


class _Slab:
    """128-byte-aligned host slots for maps, 512 to a page: a map takes the next slot and keeps its page alive, so a
    page goes when its last map does (no allocation or alignment arithmetic per map)."""

    SLOTS = 512

    def __init__(self):
        self.page, self.base, self.next = None, 0, self.SLOTS

    def take(self) -> tuple[object, int]:
        if self.next == self.SLOTS:
            self.page = np.zeros(self.SLOTS * TENSOR_MAP_BYTES + 127, dtype=np.uint8)
            self.base = self.page.ctypes.data + (-self.page.ctypes.data) % 128
            self.next = 0
        address = self.base + self.next * TENSOR_MAP_BYTES
        self.next += 1
        return self.page, address


_slab = _Slab()


class TensorMap:
    """An encoded tiled tensor map: 128 bytes in 128-byte-aligned host memory this object holds.

    Passed to `Kernel.launch` it goes by value (``__drvtma_param__``: the driver reads these bytes at each launch).
    Holds the global buffer it was encoded for.
    """

    def __init__(self, encoded, params: MapParams | None, address: int, *,
                 spec: TensorMapSpec | Im2colSpec | None = None, keepalive=None, geometry=None):
        # Python objects (cuda-python's CUtensorMap included) may sit at 16-byte alignment; TMA maps want 64/128.
        self._page, self._host = _slab.take()
        ctypes.memmove(self._host, encoded.getPtr(), TENSOR_MAP_BYTES)
        self._param = (self._host, TENSOR_MAP_BYTES)
        self._params, self._geometry = params, geometry
        self._spec, self._address, self._keepalive = spec, int(address), keepalive

    @property
    def params(self) -> MapParams:  # Im2colParams for an im2col map
        if self._params is None:
            if self._geometry is not None:
                self._params = self._geometry.params
            else:
                assert self._spec is not None  # a map is made with its params, a geometry or a spec
                self._params = self._spec.tma_params()
        return self._params

    @property
    def spec(self) -> TensorMapSpec | Im2colSpec | None:
        """The spec, its base_address this map's address (built when asked: encoding does not need it)."""
        spec = self._spec
        if spec is not None and spec.base_address != self._address:
            self._spec = spec = spec.replace(base_address=self._address)
        return spec

    @property
    def address(self) -> int:
        return self._address

    @property
    def host_address(self) -> int:
        return self._host

    def to_bytes(self) -> bytes:
        return ctypes.string_at(self._host, TENSOR_MAP_BYTES)

    def __drvtma_param__(self) -> tuple[int, int]:
        return self._param

    def replace_address(self, target) -> None:
        """Point the map at another global buffer or address (cuTensorMapReplaceAddress), checked first."""
        from cuda.bindings import driver as cu

        spec = self.spec
        address, keepalive, available = _resolve_target(None, target)
        error = address_error(address, self.params.interleave) or (spec and bounds_error(spec, available))
        if error:
            raise error
        driver.context()
        driver.call(cu.cuTensorMapReplaceAddress, cu.CUtensorMap(_ptr=self._host), address)
        self._address, self._keepalive = address, keepalive

    def describe(self) -> str:
        head = f"TensorMap at global 0x{self._address:x} (host copy 0x{self.host_address:x}, 128 B)"
        spec = self.spec
        body = spec.describe() if spec is not None else f"  {self.params.describe()}"
        return f"{head}\n{body}"

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return f"TensorMap(0x{self._address:x}, {self.params.describe()})"
