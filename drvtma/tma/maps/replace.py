"""The host model of `tensormap.replace.tile`: each edit's effect on a TensorMapSpec and on the 128 bytes.

PTX numbers things its own way, and this module is where drvtma translates:
- `.rank` takes rank - 1 ("zero-based numbering");
- `.elemtype` codes are not CUtensorMapDataType: 8 is f32.ftz, 9 f64, 10 bf16 (the driver: 8 f64, 9 bf16, 10 f32.ftz);
- `ord` counts dimensions fastest first (TMA order); for `.global_stride`, ord k is the stride of dimension k + 1;
- box dims, global dims, strides (bytes) and element strides take actual values (as ptxas's SASS shows).
The byte effect is drvtma.tma.tiled.decode's layout: `apply_to_bytes` is exact for every field, `apply_to_spec` says
what the edited map means. Field numbers match cu/include/drvtma/tensormap.cuh.

Im2col maps: PTX's tensormap.replace has one mode, `.tile`, and no field for an im2col map's corners, channels per
pixel or pixels per column. The fields it does have sit at the same bits in an im2col map (im2col.decode, from 3,410
driver-encoded maps), so the model applies them to an im2col map's bytes and spec as to a tiled one's; box_dim and
rank are refused (`im2col_edit_error`): their bits hold the corners and channels per pixel there. Editing an im2col map
on the device is outside the `.tile` mode PTX documents and was not yet run on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import TensorMapError, as_int
from ..dtypes import (  # noqa: F401 (PTX_ELEMTYPE, DTYPE_OF_PTX_ELEMTYPE: still importable from here)
    DTYPE_OF_PTX_ELEMTYPE,
    PTX_ELEMTYPE,
    TF32_DTYPES,
    TF32_OF,
    tma_dtype,
)
from ..im2col.spec import Im2colSpec
from ..tiled import decode as D
from ..tiled.spec import MAX_RANK, TensorMapSpec, to_tma_order

FIELDS = ("global_address", "rank", "box_dim", "global_dim", "global_stride", "element_stride", "elemtype",
          "interleave", "swizzle", "fill")
ORD_FIELDS = frozenset({"box_dim", "global_dim", "global_stride", "element_stride"})
IMMEDIATE_FIELDS = frozenset({"elemtype", "interleave", "swizzle", "fill"})  # PTX wants an immediate value

_RANGES = {"interleave": 3, "swizzle": 4, "fill": 2, "elemtype": 13}


# Values the hardware takes for each field (it checks none of them; drvtma does, before they reach the device).
_LIMITS = {"box_dim": (1, 256), "global_dim": (1, 1 << 32), "element_stride": (1, 8), "rank": (0, MAX_RANK - 1),
           "global_stride": (16, (1 << 40) - 16), "global_address": (0, (1 << 57) - 16)}


def _check(f: str, value: int, ord_: int) -> None:
    if f in ORD_FIELDS and not 0 <= ord_ < MAX_RANK - (f == "global_stride"):
        raise TensorMapError("replace_ord", f"{f} ord", ord_, "use ord 0..4 (TMA order; global_stride: 0..3, the "
                             "stride of dimension ord + 1)")
    if f in _RANGES and not 0 <= value < _RANGES[f]:
        raise TensorMapError("replace_value", f, value, f"use a PTX code 0..{_RANGES[f] - 1} (sm_90)")
    lo, hi = _LIMITS.get(f, (0, (1 << 32) - 1))
    if not lo <= value <= hi:
        raise TensorMapError("replace_range", f, value, f"use {lo}..{hi}",
                             "tensormap.replace checks nothing: the value would be truncated to its field "
                             "(a box of 0 becomes 256, 257 becomes 1) and loads hang or read the wrong box")
    if f in ("global_stride", "global_address") and value % 16:
        raise TensorMapError("replace_range", f, value, "use a multiple of 16 (the low 4 bits are not stored)"
                             if f == "global_stride" else "use a 16-byte aligned address")


@dataclass(frozen=True)
class Edit:
    """One `tensormap.replace.tile.<field>` with PTX's own value (see the module notes); `ord` in TMA order.

    Values are checked against what the field holds; `Edit.unchecked` skips that (the pitfall probes)."""

    field: str
    value: int
    ord: int = 0
    checked: bool = True

    def __post_init__(self):
        if self.field not in FIELDS:
            raise TensorMapError("replace_field", "field", self.field, f"use one of {', '.join(FIELDS)}",
                                 "tensormap.replace.tile has no such field")
        width = 64 if self.field in ("global_address", "global_stride") else 32
        object.__setattr__(self, "value", as_int(self.value, self.field, error=TensorMapError, rule="replace_value"))
        object.__setattr__(self, "ord", as_int(self.ord, f"{self.field} ord", error=TensorMapError,
                                               rule="replace_ord"))
        if not 0 <= self.value < (1 << width):
            raise TensorMapError("replace_value", self.field, self.value, f"the operand is .b{width}")
        if self.checked:
            _check(self.field, self.value, self.ord)

    @classmethod
    def unchecked(cls, field: str, value: int, ord: int = 0) -> Edit:
        return cls(field, value, ord, checked=False)

    def to_words(self) -> np.ndarray:
        """What cu/tma/global_map.cu's TmapEdit holds: field number, ord, value low and high 32 bits."""
        return np.array([FIELDS.index(self.field), self.ord, self.value & 0xFFFFFFFF, self.value >> 32],
                        dtype=np.uint32)

    # ---- constructors that translate drvtma's names into PTX's values
    @classmethod
    def rank(cls, rank: int) -> Edit:
        return cls("rank", as_int(rank, "rank", error=TensorMapError, rule="replace_range", lo=1, hi=MAX_RANK) - 1)

    @classmethod
    def elemtype(cls, dtype) -> Edit:
        return cls("elemtype", PTX_ELEMTYPE[tma_dtype(dtype)])


def _numpy_axis(rank: int, tma_dim: int) -> int:
    return rank - 1 - tma_dim


def _set(values: tuple, index: int, value) -> tuple:
    out = list(values)
    out[index] = value
    return tuple(out)


IM2COL_REFUSED = {
    "box_dim": "an im2col map stores channels per pixel - 1 in box_dim ord 0's bits and the corners in ords 1-4's",
    "rank": "an im2col map's corners are 16, 8 or 5 bits wide by rank (3, 4, 5): a new rank re-reads every corner",
}


def im2col_edit_error(edit: Edit) -> TensorMapError | None:
    """The refusal of an edit that means something else on an im2col map (None: the edit means the same, or it is
    `Edit.unchecked`: the bare bitfield insert ptxas emits, whatever the mode)."""
    if edit.field not in IM2COL_REFUSED or not edit.checked:
        return None
    return TensorMapError("replace_im2col_field", edit.field, edit.value,
                          "change the Im2colSpec on the host and re-encode it (encode_im2col, or "
                          "im2col.decode.encode_im2col_bytes), then copy the 128 bytes to the device: "
                          "tensormap.replace has no im2col field (corners, channels per pixel, pixels per column)",
                          IM2COL_REFUSED[edit.field])


def _check_types(spec, edit, *, im2col: bool = False) -> None:
    if not isinstance(spec, (TensorMapSpec, Im2colSpec) if im2col else TensorMapSpec):
        raise TensorMapError("type", "spec", type(spec).__name__, "give a TensorMapSpec"
                             + (" or an Im2colSpec" if im2col else ""))
    if not isinstance(edit, Edit):
        raise TensorMapError("type", "edit", type(edit).__name__, "give an Edit, e.g. Edit('box_dim', 64, ord=0)")
    if isinstance(spec, Im2colSpec) and (refused := im2col_edit_error(edit)):
        raise refused


def apply_to_spec(spec: TensorMapSpec, edit: Edit) -> TensorMapSpec:
    """The spec an edit makes (NumPy order), a TensorMapSpec's or an Im2colSpec's. A rank edit keeps the innermost
    dims when shrinking; growing needs the bytes (the slots past the old rank hold what the driver left there): use
    `decode(apply_to_bytes(...))`."""
    _check_types(spec, edit, im2col=True)
    r, f, v = spec.rank, edit.field, edit.value
    if f == "global_address":
        return spec.replace(base_address=v)
    if f == "rank":
        new = (v & 7) + 1
        if new > r:
            raise TensorMapError("replace_rank_grow", "rank", new, "use decode(apply_to_bytes(...)): the slots "
                                 "past the old rank hold what the driver left there", f"the spec has rank {r}")
        keep = slice(r - new, r)
        assert spec.element_strides is not None  # __post_init__ fills it
        return spec.replace(shape=spec.shape[keep], strides_bytes=spec.strides_bytes[keep], box=spec.box[keep],
                            element_strides=spec.element_strides[keep])
    if f in ORD_FIELDS:
        d = edit.ord + (1 if f == "global_stride" else 0)
        if d >= r:
            raise TensorMapError("replace_ord", f"{f} ord", edit.ord, f"use ord < {r - (f == 'global_stride')} "
                                 "(TMA order), or apply_to_bytes after a rank edit",
                                 f"past the rank-{r} map (a later rank edit may expose it)")
        attr = {"box_dim": "box", "global_dim": "shape", "global_stride": "strides_bytes",
                "element_stride": "element_strides"}[f]
        stored = {"box_dim": ((v - 1) & 0xFF) + 1, "global_dim": ((v - 1) & 0xFFFFFFFF) + 1,
                  "element_stride": ((v - 1) & 7) + 1, "global_stride": v & ((1 << 40) - 16)}[f]
        return spec.replace(**{attr: _set(getattr(spec, attr), _numpy_axis(r, d), stored)})
    if f == "elemtype":
        dt = DTYPE_OF_PTX_ELEMTYPE[v]
        if spec.dtype in TF32_DTYPES and v <= 10:  # the tf32 flag stays set (see apply_to_bytes)
            kept = TF32_OF.get(dt)
            if kept is None:
                raise TensorMapError("replace_tf32_flag", "elemtype", v,
                                     "edit a tf32 map to f32 / f32.ftz only, or re-encode it on the host",
                                     f"the map keeps rounding to tf32, and no type is {dt.name} + tf32")
            dt = kept
        # The innermost stride is the element itself (NumPy's view of the same bytes as the new type).
        return spec.replace(dtype=dt, strides_bytes=spec.strides_bytes[:-1] + (dt.itemsize,))
    return spec.replace(**{{"interleave": "interleave", "swizzle": "swizzle", "fill": "oob_fill"}[f]: v})


def edits_to(spec: TensorMapSpec, target: TensorMapSpec) -> list[Edit]:
    """Edits that turn a map of `spec` into one of `target` (same rank), each field only where it differs."""
    _check_types(spec, Edit("rank", 0))
    _check_types(target, Edit("rank", 0))
    if spec.rank != target.rank:
        raise TensorMapError("replace_rank", "target.rank", target.rank, "add Edit.rank(...) yourself",
                             f"edits_to keeps the rank ({spec.rank})")
    out: list[Edit] = []
    if target.base_address != spec.base_address and target.base_address is not None:
        out.append(Edit("global_address", target.base_address))
    for f, attr in (("global_dim", "shape"), ("box_dim", "box"), ("element_stride", "element_strides")):
        for d, (a, b) in enumerate(zip(to_tma_order(getattr(spec, attr)), to_tma_order(getattr(target, attr)))):
            if a != b:
                out.append(Edit(f, b, d))
    for d, (a, b) in enumerate(zip(to_tma_order(spec.strides_bytes)[1:], to_tma_order(target.strides_bytes)[1:])):
        if a != b:
            out.append(Edit("global_stride", b, d))
    if target.dtype != spec.dtype:
        if spec.dtype in TF32_DTYPES and target.dtype not in TF32_DTYPES:
            raise TensorMapError("replace_tf32_flag", "dtype", f"{spec.dtype.name} -> {target.dtype.name}",
                                 "re-encode on the host, or build the map from zeros",
                                 "no tensormap.replace clears the tf32 flag a tf32 map carries")
        out.append(Edit.elemtype(target.dtype))
    for f, attr in (("interleave", "interleave"), ("swizzle", "swizzle"), ("fill", "oob_fill")):
        if int(getattr(target, attr)) != int(getattr(spec, attr)):
            out.append(Edit(f, int(getattr(target, attr))))
    return out


# ---------------------------------------------------------------------------------------------- the 128 bytes

def ptxas_clears_small_tensor_bit(nvrtc_version: tuple[int, int] | None = None) -> bool:
    """Whether the ptxas inside NVRTC (default: the one drvtma compiles with) clears bit 85 when it replaces the
    global address: 13.5's does, 13.0's does not (both read in the SASS; docs/tensormap.md). Versions between are
    taken to behave like 13.0."""
    if nvrtc_version is None:
        from ...runtime.compiler import nvrtc_version as current

        nvrtc_version = current()
    return tuple(nvrtc_version) >= (13, 5)


def apply_to_bytes(raw, edit: Edit, *, clears_small_tensor_bit: bool | None = None) -> bytes:
    """The map after one edit, as ptxas implements it (a bitfield insert into the stored field, as the SASS shows;
    pinned by the GPU tests): values are stored as the decoder reads them (dims, boxes, element strides minus one,
    strides >> 4) and truncated to the field, so box 0 becomes 256 and 257 becomes 1; nothing else moves, so the
    two words the driver derives (box bytes, swizzle marker) keep their old values. An im2col map's bytes take every
    field but box_dim and rank (`im2col_edit_error`), at the same bits. Side effects: a new swizzle
    clears bit 86; a new global address clears bit 85 (Blackwell's small-tensor bit) with NVRTC 13.5's ptxas, not
    13.0's (`clears_small_tensor_bit`, default `ptxas_clears_small_tensor_bit()`); elemtype 0..10 leaves the tf32
    flag as it was (11 and 12 set it)."""
    if clears_small_tensor_bit is None:
        clears_small_tensor_bit = ptxas_clears_small_tensor_bit()

    if not isinstance(edit, Edit):
        raise TensorMapError("type", "edit", type(edit).__name__, "give an Edit, e.g. Edit('box_dim', 64, ord=0)")
    v = int.from_bytes(D.map_bytes(raw), "little")
    if D.get(v, D.IM2COL_MODE) and (refused := im2col_edit_error(edit)):
        raise refused
    f, x, k = edit.field, edit.value, edit.ord
    if f == "global_address":
        v = D.put(v, D.ADDRESS, x)
        if clears_small_tensor_bit:
            v = D.put(v, D.SMALL_TENSOR_BIT, 0)
    elif f == "rank":
        v = D.put(v, D.RANK, x)
    elif f == "box_dim":
        v = D.put(v, D.BOX_DIM[k], x - 1)
    elif f == "global_dim":
        v = D.put(v, D.GLOBAL_DIM[k], x - 1)
    elif f == "global_stride":
        v = D.put(D.put(v, D.STRIDE_LOW[k], x >> 4), D.STRIDE_HIGH[k], x >> 36)
    elif f == "element_stride":
        v = D.put(v, D.ELEMENT_STRIDE[k], x - 1)
    elif f == "elemtype":
        if x in (11, 12):
            v = D.put(D.put(v, D.ELEMTYPE, x - 4), D.TF32_FLAG, 1)
        else:
            v = D.put(v, D.ELEMTYPE, x)
    elif f == "interleave":
        v = D.put(v, D.INTERLEAVE, x)
    elif f == "swizzle":
        v = D.put(D.put(v, D.SWIZZLE, x), D.SWIZZLE_ATOMICITY_BIT, 0)
    else:
        v = D.put(v, D.OOB_FILL, x)
    return v.to_bytes(128, "little")


def apply_all(raw, edits, **options) -> bytes:
    for e in edits:
        raw = apply_to_bytes(raw, e, **options)
    return raw
