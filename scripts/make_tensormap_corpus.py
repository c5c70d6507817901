#!/usr/bin/env python3
"""Encode tensor maps with the driver and write (spec, address, bytes) triples: the decoder's test corpus.

`python3 scripts/make_tensormap_corpus.py --out DIR [--random 3000] [--seed 14]` writes DIR/tensormap_corpus.json.gz:
{"driver": ..., "entries": [{"kind": "random" | "probe", "label": ..., "spec": spec.to_dict(), "bytes": hex}
| {..., "refused": "<CudaError>"}]}. Random specs come from drvtma.testing.tensormaps.random_spec (every dtype, rank,
interleave, swizzle, L2 promotion and fill, random addresses); probes vary one parameter of a base spec at a time,
so the bytes each parameter moves show. Needs a GPU driver (the encode does), not a kernel.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from drvtma.errors import CudaError  # noqa: E402
from drvtma.runtime import driver  # noqa: E402
from drvtma.testing.tensormaps import one_at_a_time_specs, random_spec  # noqa: E402
from drvtma.tma.tiled.encode import encode_unchecked  # noqa: E402


def entry(kind: str, label: str, spec) -> dict:
    e = {"kind": kind, "label": label, "spec": spec.to_dict()}
    try:
        e["bytes"] = encode_unchecked(spec.tma_params(), spec.base_address, spec=spec).to_bytes().hex()
    except CudaError as exc:
        e["refused"] = exc.name
    return e


def build(n_random: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    entries = [entry("probe", label, spec) for label, spec in one_at_a_time_specs()]
    entries += [entry("random", "", random_spec(rng)) for _ in range(n_random)]
    return {"driver": driver.versions(), "seed": seed, "entries": entries}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--random", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    corpus = build(args.random, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tensormap_corpus.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(corpus, f, separators=(",", ":"))
    refused = sum("refused" in e for e in corpus["entries"])
    print(f"wrote {path}: {len(corpus['entries'])} entries, {refused} refused by the driver")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
