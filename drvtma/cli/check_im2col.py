"""`drvtma check --im2col`: the im2col spec from --json and the flags (check.py reads the shared ones)."""

from __future__ import annotations

from ..tma.dtypes import tma_dtype
from ..tma.im2col.spec import Im2colSpec

IM2COL_FLAGS = {"lower_corner": "--lower-corner", "upper_corner": "--upper-corner",
                "channels_per_pixel": "--channels-per-pixel", "pixels_per_column": "--pixels-per-column"}


def _one(values, flag: str) -> int:
    if len(values) != 1:
        raise ValueError(f"{flag}: wants one integer, got {len(values)}")
    return values[0]


def im2col_spec(fields: dict, args) -> Im2colSpec:
    """An Im2colSpec from --json's fields (already updated with the shared flags) and the im2col flags."""
    if args.box is not None or fields.pop("box", None) is not None:
        raise ValueError("--box: an im2col map has no box; give --channels-per-pixel and --pixels-per-column")
    if args.allow_undocumented:
        raise ValueError("--allow-undocumented: tiled maps only")
    if args.show:
        raise ValueError("--show: draws tiled maps only; drop it with --im2col")
    for key, flag in IM2COL_FLAGS.items():
        value = getattr(args, key)
        if value is not None:
            fields[key] = _one(value, flag) if key.endswith(("pixel", "column")) else value
    for key in ("dtype", "shape", *IM2COL_FLAGS):
        if fields.get(key) is None:
            flag = IM2COL_FLAGS.get(key, f"--{key}")
            raise ValueError(f"{key}: an im2col spec needs one; give {flag} (or {key!r} in --json)")
    strides = fields.pop("strides", None)
    if strides is not None:  # in elements: the spec keeps bytes
        size = tma_dtype(fields["dtype"]).itemsize
        fields["strides_bytes"] = [int(v) * size for v in strides]
    if args.allow_overlap:
        fields["allow_overlap"] = True
    return Im2colSpec.from_dict(fields)


def tiled_only(args) -> str | None:
    """The first im2col flag given without --im2col (a usage error), else None."""
    for key, flag in IM2COL_FLAGS.items():
        if getattr(args, key) is not None and not args.im2col:
            return f"{flag}: an im2col option; add --im2col"
    return None
