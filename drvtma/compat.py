"""What differs between the versions of cuda-bindings, cuda.core and hypothesis drvtma runs with, in one place:
each function answers for the installed version, so the rooms never test versions themselves."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import random
from typing import Any


def strided_view_maker(protocol: str):
    """cuda.core's StridedMemoryView constructor for `protocol` ("dlpack" or "cuda_array_interface"): the named
    classmethod (cuda.core >= 0.5), else the class itself (older versions try DLPack, then the interface)."""
    from cuda.core.utils import StridedMemoryView

    return getattr(StridedMemoryView, f"from_{protocol}", StridedMemoryView)


def kernel_param_count(cu):
    """cuKernelGetParamCount where these bindings have it (cuda-bindings 13.2+; the driver must be 13.2+ too),
    else None."""
    return getattr(cu, "cuKernelGetParamCount", None)


# cuda.core (1.2) has no public accessor for a TensorMapDescriptor's bytes: the map is a private field, reachable
# only through the kernel-argument holder that `launch` packs it with (it needs no GPU). Its module moved between
# versions; these are the places it has been.
_PARAM_HOLDERS = ("cuda.core._kernel_arg_handler", "cuda.core.cu13._kernel_arg_handler",
                  "cuda.core.cu12._kernel_arg_handler", "cuda.core.experimental._kernel_arg_handler")


def tensor_map_descriptor_bytes(desc, size: int) -> bytes:
    """The `size` bytes of a cuda.core TensorMapDescriptor, read where cuda.core packs it as a kernel argument."""
    for name in _PARAM_HOLDERS:
        try:
            holder_type = importlib.import_module(name).ParamHolder
        except (ImportError, AttributeError):
            continue
        holder = holder_type([desc])
        address = ctypes.c_void_p.from_address(holder.ptr).value
        assert address is not None  # the holder's first slot points at the packed descriptor: never NULL
        return ctypes.string_at(address, size)
    raise TypeError("this cuda.core has no ParamHolder to read a TensorMapDescriptor's bytes from")


def hypothesis_choices_to_bytes():
    """hypothesis.database.choices_to_bytes, or None in a hypothesis older than the choice-sequence database."""
    try:
        from hypothesis.database import choices_to_bytes
    except ImportError:
        return None
    return choices_to_bytes


@contextlib.contextmanager
def hypothesis_random_seeded(seed: int):
    """hypothesis' own random (the one a `find` without `random=` draws from) seeded for the block, then put back: a
    find that replays examples from a database cannot take `random=` (a seeded test reads no database), and
    otherwise shrinks as whatever ran before in the process left that random. The attribute is private: hypothesis
    6.80 keeps it in hypothesis.core, later ones in hypothesis.core.threadlocal; elsewhere the block runs unseeded."""
    import hypothesis.core as core

    holder: Any = getattr(core, "threadlocal", core)
    name = "_hypothesis_global_random"
    if not hasattr(holder, name):
        yield
        return
    before = getattr(holder, name)
    setattr(holder, name, random.Random(seed))
    try:
        yield
    finally:
        setattr(holder, name, before)


def hypothesis_profile_name() -> str | None:
    """The name of hypothesis' loaded settings profile: `settings.get_current_profile_name()` where hypothesis has it,
    else the class attribute that method reads (hypothesis 6.80, the lowest the test extra allows, has no method)."""
    from hypothesis import settings

    get = getattr(settings, "get_current_profile_name", None)
    return get() if get is not None else settings._current_profile


def drvtma_version() -> str:
    """drvtma's own version (what shard reports must share to merge). drvtma/__init__.py has run before any room
    (Python imports the package first), so it is read from there rather than imported: no room imports the top."""
    import sys

    return sys.modules["drvtma"].__version__


_TENSOR_MAP_ENUMS = {"interleave": "TensorMapInterleave", "swizzle": "TensorMapSwizzle",
                     "l2_promotion": "TensorMapL2Promotion", "oob_fill": "TensorMapOOBFill"}


def tensor_map_enums() -> dict:
    """cuda.core's enum class of each `as_tensor_map` option ("interleave", "swizzle", "l2_promotion", "oob_fill"):
    the top-level name where this cuda.core exports it, else the type of `TensorMapDescriptorOptions`' own default
    (cuda.core 1.2 exports the options class but not its enums)."""
    import cuda.core as core

    defaults = core.TensorMapDescriptorOptions(box_dim=(1,))
    return {field: getattr(core, name, None) or type(getattr(defaults, field))
            for field, name in _TENSOR_MAP_ENUMS.items()}
