"""The experiment of B-08, a Chinese blog chapter on Hopper TMA ("Hopper TMA：从单线程 Bulk Copy 到吞吐墙") timed on
an RTX 5090: its four modes (sync, bulk1d, tensor2d, pipe2) and the rings built on them
(pipeN, ws), verified by per-tile checksums (`verify`), modelled on the CPU (`ring`), swept (`sweep`), and bounded
by the memory roof (`roof`) and each ring's own halves (`floors`)."""

from .modes import ALL_MODES, ARTICLE_MODES, MODES, B08Runner, ModeConfig
from .sweep import SweepConfig, preset, run_sweep

__all__ = ["ALL_MODES", "ARTICLE_MODES", "MODES", "B08Runner", "ModeConfig", "SweepConfig", "preset", "run_sweep"]
