"""Pictures of what a tensor map puts in shared memory (`draw_image`, labels from `tma.tiled.oracle`), what a wgmma
descriptor reads from it (`overlay`) and how a warp's reads meet the banks (`bank_report`); drawn as SVG
(`svg_text`), PNG (`write_png`, matplotlib) or terminal text (`text_form`). `drvtma show`. Needs no GPU."""

from .banks import BANKS, MODEL, PATTERNS, BankReport, bank_report, wavefronts
from .grid import Cell, cells, expand_label
from .image import Element, Picture, draw_image
from .overlay import Overlay, overlay
from .png import write_png
from .scene import Scene, build
from .svg import svg_text
from .text import text_form

__all__ = ["BANKS", "MODEL", "PATTERNS", "BankReport", "bank_report", "wavefronts", "Cell", "cells", "expand_label",
           "Element", "Picture", "draw_image", "Overlay", "overlay", "write_png", "Scene", "build", "svg_text",
           "text_form"]
