"""Measured coverage of the fuzz targets (`core`: classes, universes, hit counts; one module per target family
holds its model). What a campaign covered is a figure, not a belief: see `core`'s docstring."""

from .core import (BOUNDARIES, MIN_HITS, SIGNS, Labels, Coverage, CoverageModel, Universe, boundaries, case_pairs, count_names,
                   coverage_of, element_stride_class, feasible_by, measure, name, pairwise, sign_class)

__all__ = ["BOUNDARIES", "MIN_HITS", "SIGNS", "Labels", "Coverage", "CoverageModel", "Universe", "boundaries", "case_pairs",
           "count_names", "coverage_of", "element_stride_class", "feasible_by", "measure", "name", "pairwise",
           "sign_class"]
