"""Measured coverage of the fuzz targets (`core`: classes, universes, hit counts; one module per target family
holds its model). What a campaign covered is a figure, not a belief: see `core`'s docstring."""

from .core import (
    AXIS_FIELDS,
    BOUNDARIES,
    EXTENTS,
    MIN_HITS,
    SIGNS,
    Coverage,
    CoverageModel,
    Labels,
    Universe,
    boundaries,
    case_pairs,
    completions,
    count_names,
    coverage_of,
    element_stride_class,
    extent_class,
    feasible_by,
    hypothesis_events,
    measure,
    name,
    pairwise,
    sign_class,
)

__all__ = ["AXIS_FIELDS", "BOUNDARIES", "EXTENTS", "MIN_HITS", "SIGNS", "Coverage", "CoverageModel", "Labels",
           "Universe", "boundaries", "case_pairs", "completions", "count_names", "coverage_of", "element_stride_class",
           "extent_class", "feasible_by", "hypothesis_events", "measure", "name", "pairwise", "sign_class"]
