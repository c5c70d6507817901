"""Wrong inputs to drvtma's public Python API (see bad_inputs.py for what each case asserts)."""

from __future__ import annotations

from bad_inputs import ApiCase

from drvtma.errors import TensorMapError

CASES: list[ApiCase] = [
    ApiCase("spec-from-json-list", lambda: __import__("drvtma").TensorMapSpec.from_json("[1, 2]"), TensorMapError,
            ("json",)),
]
