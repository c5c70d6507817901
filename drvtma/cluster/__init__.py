"""Thread-block clusters and TMA multicast.

- `multicast`: the rules of a multicast (mask, issuer, slots, overlap) and its NumPy oracle: every receiving CTA's
  image and the bytes each CTA must arm; needs no GPU.
- `probe`: the GPU runners (cu/cluster/): many clusters per launch, every CTA's images and barrier states back.
- `bench`: `drvtma bench multicast`, multicast against each CTA loading its own copy.
Cluster launch checks live in drvtma.runtime.cluster_launch (every launch goes through them).
"""

from .multicast import (
    Multicast,
    check_cluster_ops,
    check_multicast,
    cta_rank,
    expected_images,
    expected_tx,
    mask_of,
    random_cluster_ops,
    slot_bytes_for,
)

__all__ = ["Multicast", "check_cluster_ops", "check_multicast", "cta_rank", "expected_images", "expected_tx",
           "mask_of", "random_cluster_ops", "slot_bytes_for"]
