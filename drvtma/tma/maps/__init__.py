"""A map as 128 bytes wherever it lives, of either mode: what a map from anywhere breaks (`findings`), the host
model of the device's `tensormap.replace` edits (`replace`), maps in global / `__constant__` memory and the edits
made there (`global_maps`), and what each way of passing a map costs (`descriptor_bench`, `drvtma bench
descriptors`). docs/tensormap.md

Reads the tiled and im2col rooms' decoders and rules; neither imports this room.
"""

from .descriptor_bench import DescriptorBench, run_descriptor_bench
from .findings import Finding, MapReport, Plausibility, explain, map_findings, plausibility
from .global_maps import GlobalMapRunner, MapSlots, ReplaceJob, ReplaceResult, check_map_address
from .replace import Edit, apply_all, apply_to_bytes, apply_to_spec, edits_to

__all__ = ["DescriptorBench", "Edit", "Finding", "GlobalMapRunner", "MapReport", "MapSlots", "Plausibility",
           "ReplaceJob", "ReplaceResult", "apply_all", "apply_to_bytes", "apply_to_spec", "check_map_address",
           "edits_to", "explain", "map_findings", "plausibility", "run_descriptor_bench"]
