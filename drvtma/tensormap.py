"""The flat-layout name of the tensor-map API, kept so code written before the rooms (and the README) still runs:
`from drvtma.tensormap import TensorMapSpec, encode_tiled`. New code imports from `drvtma.tma`."""

from .tma.tiled.encode import TensorMap, encode_tiled, encode_unchecked  # noqa: F401
from .tma.tiled.rules import (  # noqa: F401
    address_alignment,
    describe_spec,
    driver_box_bytes,
    driver_should_accept,
    round_up,
    validate_all,
)
from .tma.tiled.spec import *  # noqa: F401,F403
