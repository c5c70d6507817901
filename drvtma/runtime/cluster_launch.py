"""Thread-block cluster launches, checked before the driver.

`check_cluster_shape` holds the rules that need no GPU (CI tests them); `prepare` is what `Kernel` calls when it
builds a launch: it reads the kernel's compile-time cluster dims (`__cluster_dims__`), applies the rules, sets the
launch attribute and asks cuOccupancyMaxActiveClusters whether one cluster of that shape fits on the device with
the requested shared memory and block size, so an unschedulable shape is a clear error instead of a bare
CUDA_ERROR_INVALID_CLUSTER_SIZE from the launch.
"""

from __future__ import annotations

from typing import cast

from ..errors import ClusterError, CudaError, is_int
from .driver import call, cu, cuda_error

PORTABLE_CLUSTER_CTAS = 8  # "the portable cluster size for sm_90 is 8" [doc D]
# Hopper's most with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (what ran: docs/results/multicast.md)
NON_PORTABLE_CLUSTER_CTAS = 16


def _dims(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if is_int(value) else tuple(value) if isinstance(value, (tuple, list)) else ()
    if not 1 <= len(dims) <= 3 or not all(is_int(d) and d >= 1 for d in dims):
        raise ClusterError("cluster_dims", what, value, "give a positive int or 1-3 positive ints")
    return cast("tuple[int, int, int]", tuple(int(d) for d in dims) + (1,) * (3 - len(dims)))  # padded to 3


def check_cluster_shape(grid, cluster, *, non_portable: bool = False,
                        required: tuple[int, int, int] | None = None) -> tuple[int, int, int] | None:
    """The cluster dims a launch will run with (None: no cluster), or a ClusterError naming the broken rule.

    `required` is the kernel's `__cluster_dims__` (then `cluster` must be None or equal to it); `non_portable`
    says whether the kernel was allowed more than 8 CTAs per cluster (`allow_non_portable`).
    """
    g = _dims(grid, "grid")
    c = None if cluster is None else _dims(cluster, "cluster")
    if required is not None:
        if c is not None and c != required:
            raise ClusterError("cluster_required_dims", "cluster", c,
                               f"launch with cluster=None or cluster={required}",
                               f"the kernel was compiled with __cluster_dims__{required}; the size cannot be "
                               "changed at launch [doc G 5.2.1]")
        c = required
    if c is None:
        return None
    if any(gi % ci for gi, ci in zip(g, c)):
        fixed = tuple(-(-gi // ci) * ci for gi, ci in zip(g, c))
        raise ClusterError("cluster_grid_multiple", "grid", g, f"use grid {fixed} (grids count blocks)",
                           f"grid {g} is not a multiple of cluster {c} in every dimension")
    size = c[0] * c[1] * c[2]
    if size > NON_PORTABLE_CLUSTER_CTAS:
        raise ClusterError("cluster_size_limit", "cluster", c, f"use at most {NON_PORTABLE_CLUSTER_CTAS} CTAs",
                           f"{size} CTAs per cluster; sm_90 schedules at most {NON_PORTABLE_CLUSTER_CTAS}")
    if size > PORTABLE_CLUSTER_CTAS and not non_portable:
        raise ClusterError("cluster_size_portable", "cluster", c,
                           "call drvtma.runtime.cluster_launch.allow_non_portable(kernel) first, or use at most "
                           f"{PORTABLE_CLUSTER_CTAS} CTAs",
                           f"{size} CTAs per cluster is above the portable {PORTABLE_CLUSTER_CTAS}; the driver "
                           "refuses it unless the kernel allows non-portable sizes")
    return c


# ---------------------------------------------------------------------------------------------- GPU side

def required_cluster_dims(kernel) -> tuple[int, int, int] | None:
    """The kernel's `__cluster_dims__` (CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_*), or None when it has none."""
    dims = kernel._required_cluster
    if dims is False:
        from .driver import call, cu

        a = cu.CUfunction_attribute
        values = tuple(int(call(cu.cuFuncGetAttribute, attr, kernel.function))
                       for attr in (a.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                                    a.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
                                    a.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH))
        dims = values if all(values) else None
        kernel._required_cluster = dims
    return dims


def allow_non_portable(kernel, allow: bool = True) -> None:
    """Let `kernel` launch clusters of up to 16 CTAs (drvtma sets this attribute only when asked)."""
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    call(cu.cuFuncSetAttribute, kernel.function, attr, int(allow))
    kernel._cluster_non_portable = bool(allow)
    kernel.forget_configs()  # launch shapes checked under the old setting are checked again


def _set_cluster_dims(lc, dims) -> None:
    """Put the cluster-dimension launch attribute on `lc` (its only attribute)."""
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = dims
    lc.attrs, lc.numAttrs = [attr], 1


def max_active_clusters(kernel, lc) -> int:
    """cuOccupancyMaxActiveClusters for a launch config that carries its cluster dims (0: cannot be scheduled)."""
    code, n = cu.cuOccupancyMaxActiveClusters(kernel.function, lc)
    if code != cu.CUresult.CUDA_SUCCESS:
        raise cuda_error("cuOccupancyMaxActiveClusters", code)
    return int(n)


def occupancy(kernel, cluster, *, block, shared_mem: int = 0) -> int:
    """How many clusters of `cluster` dims with this block and dynamic shared memory can be co-resident (one
    cluster's grid; the driver's answer "is not guaranteed to be achievable")."""
    c = _dims(cluster, "cluster")
    b = _dims(block, "block")
    kernel._ensure_smem(shared_mem)
    lc = cu.CUlaunchConfig()
    lc.gridDimX, lc.gridDimY, lc.gridDimZ = c
    lc.blockDimX, lc.blockDimY, lc.blockDimZ = b
    lc.sharedMemBytes = shared_mem
    lc.hStream = 0
    _set_cluster_dims(lc, c)
    return max_active_clusters(kernel, lc)


def prepare(kernel, cfg, lc) -> tuple[int, int, int] | None:
    """Check a launch's cluster shape and put it on `lc` (a CUlaunchConfig with no attributes yet), unless the
    kernel's compiled dims apply (then `lc` stays without attributes)."""
    required = required_cluster_dims(kernel)
    dims = check_cluster_shape(cfg.grid, cfg.cluster, non_portable=kernel._cluster_non_portable,
                               required=required)
    if dims is None:
        return None
    # A __cluster_dims__ kernel launched with no cluster: the compiled dims apply and the launch names none, but the
    # occupancy query needs them, so it gets a config of its own. (Emptying lc's attributes after setting them
    # double-frees them in cuda-bindings before 13.3.0.)
    query = lc if required is None or cfg.cluster is not None else _copy_shape(lc)
    _set_cluster_dims(query, dims)
    try:
        active, why = max_active_clusters(kernel, query), "says no cluster"
    except CudaError as exc:  # e.g. CUDA_ERROR_INVALID_CLUSTER_SIZE: the same verdict, with the driver's reason
        active, why = 0, f"fails with {exc.name}: no cluster"
    if active < 1:
        raise ClusterError("cluster_schedulable", "cluster", dims,
                           "use fewer CTAs per cluster, less shared memory or fewer threads per block",
                           f"cuOccupancyMaxActiveClusters {why} of {dims[0] * dims[1] * dims[2]} CTAs with "
                           f"{cfg.shared_mem} B of dynamic shared memory and block {cfg.block} fits on one GPC")
    return dims


def _copy_shape(lc):
    """A CUlaunchConfig with `lc`'s grid, block, shared memory and stream, and no attributes."""
    copy = cu.CUlaunchConfig()
    copy.gridDimX, copy.gridDimY, copy.gridDimZ = lc.gridDimX, lc.gridDimY, lc.gridDimZ
    copy.blockDimX, copy.blockDimY, copy.blockDimZ = lc.blockDimX, lc.blockDimY, lc.blockDimZ
    copy.sharedMemBytes, copy.hStream = lc.sharedMemBytes, lc.hStream
    return copy
