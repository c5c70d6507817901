"""Fuzz campaigns for users: `drvtma fuzz TARGET` and `drvtma repro FILE`.

- `targets`: what a target provides (`Target`, `Session`, `Outcome`, `spec_labels`) and the open registry (`register`, `get_target`);
  built in: encode (validator vs driver), loads, stores, reductions.
- `campaign`: seeded cases in batches, counts by dtype / rank / swizzle / fill, sharding bookkeeping;
- `shrink`: failures shrunk by hypothesis, the persistent example database replayed first;
- `report`: summary table, Markdown and JSON reports, reproducer files and their replay;
- `shard`: one subprocess per GPU (CUDA_VISIBLE_DEVICES), results merged;
- `choosers`: recorded seeded draws that hypothesis can replay.
"""

from .campaign import CampaignResult, Failure, merge_results, run_campaign
from .targets import BUILTIN_TARGETS, Outcome, Session, Target, get_target, register, spec_labels, target_names

__all__ = ["BUILTIN_TARGETS", "CampaignResult", "Failure", "Outcome", "Session", "Target", "get_target",
           "merge_results", "register", "run_campaign", "spec_labels", "target_names"]
