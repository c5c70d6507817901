"""Test helpers for users and for drvtma's own suite: hypothesis strategies and seeded builders of valid, broken
and arbitrary tensor-map specs, coordinates and special float values (`strategies`); the decode corpus's spec
generators (`tensormaps`); random multicast batches (`multicast`); fault children that import the same drvtma
(`children`); the pytest plugin (`plugin`: gpu marker, `drvtma_ctx`, `tma_probe`, hypothesis profiles)."""

from .strategies import (ADDRESS_BASE, DrawChooser, RngChooser, applicable_rules, break_rule, build_any_spec,
                         build_coordinates, build_invalid_spec, build_misaligned_coordinates, build_valid_spec,
                         invalid_specs, load_cases, special_float_bits, valid_specs)

__all__ = ["ADDRESS_BASE", "DrawChooser", "RngChooser", "applicable_rules", "break_rule", "build_any_spec",
           "build_coordinates", "build_invalid_spec", "build_misaligned_coordinates", "build_valid_spec",
           "invalid_specs", "load_cases", "special_float_bits", "valid_specs"]
