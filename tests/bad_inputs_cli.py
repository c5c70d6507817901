"""Wrong inputs to every `drvtma` command (see bad_inputs.py for what each case asserts)."""

from __future__ import annotations

from bad_inputs import CliCase

CASES: list[CliCase] = [
    CliCase("decode-not-hex", ("decode", "xyz"), ("hex",)),
]
