"""Test helpers for users and for drvtma's own suite: hypothesis strategies and seeded builders of valid, broken
and arbitrary tensor-map specs, coordinates and special float values (`strategies`); the decode corpus's spec
generators (`tensormaps`); random multicast batches (`multicast`); fault children that import the same drvtma
(`children`); the pytest plugin (`plugin`: gpu marker, `drvtma_ctx`, `tma_probe`, `tma_check`, hypothesis
profiles); `check_images` (`failures`: images against the oracle's, a JSON reproducer and an SVG on a mismatch)."""

__all__ = ["ADDRESS_BASE", "DrawChooser", "RngChooser", "applicable_rules", "break_rule", "build_any_spec",
           "build_coordinates", "build_invalid_spec", "build_misaligned_coordinates", "build_valid_spec",
           "invalid_specs", "load_cases", "special_float_bits", "valid_specs", "check_images"]


def __getattr__(name: str):
    """The strategies load on first use: pytest imports the plugin (this package) in every project where drvtma is
    installed, and that must cost no NumPy import (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'drvtma.testing' has no attribute {name!r}")
    if name == "check_images":
        from .failures import check_images

        return check_images
    from . import strategies

    return getattr(strategies, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
