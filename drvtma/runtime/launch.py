"""Launch configuration and launches (cuda.core's `_launch_config` / `_launcher` seam): `LaunchConfig` (a launch
shape, normalised and checked), a kernel's checked launch through cuLaunchKernelEx (`Launches`, what `Kernel`
launches with: shapes checked once and their CUlaunchConfig remembered), and the prepared launch
(`Kernel.prepare(config, *args)` -> `PreparedLaunch`): a pre-packed argument buffer and a pre-built CUlaunchConfig,
each call refreshing only the arguments that changed.

What cuda.core's `launch(stream, config, kernel, *args)` does at every call (cuda.core 0.5 - 1.2, _launcher.pyx):
accept the stream, check the LaunchConfig, pack every argument anew (ParamHolder: a type dispatch per argument and
an allocation), build the driver's CUlaunchConfig from it, check a cluster launch's compute capability, then
cuLaunchKernelEx. A prepared launch does strictly less: nothing for unchanged arguments or the configuration, a type
and size check and a write for each changed one, then the same cuLaunchKernelEx."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from ..errors import LaunchError, is_int
from . import cluster_launch
from .args import ArgPacker
from .driver import Stream, call, context, cu, cuda_error

_launch_kernel_ex: Any = cu.cuLaunchKernelEx if cu is not None else None  # looked up once: this is every launch's call
_SMEM_WITHOUT_OPT_IN = 48 * 1024  # static + dynamic above this needs the opt-in attribute


def _dim3(value, what: str) -> tuple[int, int, int]:
    if is_int(value):
        dims = (value,)
    elif isinstance(value, (tuple, list)):
        dims = tuple(value)
    else:
        raise LaunchError(f"{what} must be a positive int or 1-3 positive ints, got {value!r}")
    if not 1 <= len(dims) <= 3 or not all(is_int(d) and d >= 1 for d in dims):
        raise LaunchError(f"{what} must be a positive int or 1-3 positive ints, got {value!r}")
    return cast("tuple[int, int, int]", tuple(int(d) for d in dims) + (1,) * (3 - len(dims)))  # padded to 3


@dataclass(frozen=True)
class LaunchConfig:
    """Grid, block, dynamic shared memory, stream and cluster shape of one launch, normalised and checked."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0
    cluster: tuple[int, int, int] | None = None

    @classmethod
    def make(cls, grid, block, shared_mem=0, cluster=None) -> LaunchConfig:
        g, b = _dim3(grid, "grid"), _dim3(block, "block")
        if b[0] * b[1] * b[2] > 1024:
            raise LaunchError(f"block {b} has {b[0] * b[1] * b[2]} threads; the limit is 1024")
        if g[1] > 65535 or g[2] > 65535 or g[0] > 2**31 - 1:
            raise LaunchError(f"grid {g} exceeds (2^31-1, 65535, 65535)")
        if not is_int(shared_mem) or shared_mem < 0:
            raise LaunchError(f"shared_mem must be an int >= 0 (bytes of dynamic shared memory), got {shared_mem!r}")
        c = None if cluster is None else _dim3(cluster, "cluster")
        if c is not None:  # the shape rules; the size limit that depends on the kernel waits for prepare()
            cluster_launch.check_cluster_shape(g, c, non_portable=True)
        return cls(g, b, int(shared_mem), c)


class Launches:
    """How a `Kernel` (runtime.module) launches: its checked launch and its prepared launches. The kernel provides
    name, handle, params, packer (its ArgPacker), _function, static_shared_bytes and the cluster state
    runtime.cluster_launch keeps on it."""

    name: str
    handle: Any
    params: list[tuple[int, int]]
    packer: ArgPacker
    _function: Any
    _smem_optin: int

    @property
    def static_shared_bytes(self) -> int:
        """Shared memory the kernel declares itself (Kernel reads it from the driver)."""
        raise NotImplementedError

    def forget_configs(self) -> None:
        """Drop every checked launch shape (after a change of what the checks depend on, e.g. non-portable)."""
        self._configs: dict[tuple, object] = {}
        self._last_shape: tuple = (object(),) * 5  # (grid, block, shared_mem, stream, cluster) of the last launch
        self._last_config: object = None  # a CUlaunchConfig, as _configs holds

    def _ensure_smem(self, nbytes: int) -> None:
        """Raise the dynamic shared-memory cap when static + dynamic passes 48 KiB (the driver refuses the launch
        with a bare CUDA_ERROR_INVALID_VALUE otherwise), after checking the total against the device."""
        if nbytes <= self._smem_optin:
            return
        total = nbytes + self.static_shared_bytes
        limit = context().properties.smem_per_block_optin
        if total > limit:
            raise LaunchError(f"{self.name}: {nbytes} B of dynamic shared memory + {self.static_shared_bytes} B "
                              f"static exceeds the device's {limit} B per block")
        if total <= _SMEM_WITHOUT_OPT_IN:
            return
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        call(cu.cuKernelSetAttribute, attr, nbytes, self.handle, context().device)
        self._smem_optin = nbytes

    def _launch_config(self, grid, block, shared_mem, cluster, stream):
        """Check a launch shape once and build its CUlaunchConfig (filling one costs more than the launch)."""
        cfg = LaunchConfig.make(grid, block, shared_mem, cluster)
        self._ensure_smem(cfg.shared_mem)
        lc = cu.CUlaunchConfig()
        lc.gridDimX, lc.gridDimY, lc.gridDimZ = cfg.grid
        lc.blockDimX, lc.blockDimY, lc.blockDimZ = cfg.block
        lc.sharedMemBytes = cfg.shared_mem
        lc.hStream = stream.handle if stream is not None else 0
        lc.attrs, lc.numAttrs = [], 0
        cluster_launch.prepare(self, cfg, lc)  # cluster rules, __cluster_dims__, occupancy; sets the attribute
        return lc

    def launch(self, *args, grid, block, shared_mem: int = 0, stream: Stream | None = None, cluster=None) -> None:
        """Launch asynchronously: every argument checked against the kernel's parameter layout before the driver.

        Parameters
        ----------
        *args
            One per kernel parameter: DeviceBuffer or device array (DLPack / CUDA Array Interface: its address),
            TensorMap (by value), int or float (sized by the parameter), NumPy scalar (of the parameter's size).
        grid, block : int or tuple
            The launch shape (up to 3 dimensions).
        shared_mem : int
            Dynamic shared memory in bytes; above 48 KiB the opt-in attribute is set for you.
        stream : Stream, optional
            Default: the legacy stream.
        cluster : int or tuple, optional
            A thread-block cluster shape (sm_90+), checked by `runtime.cluster_launch`.

        Raises
        ------
        LaunchError, ClusterError
            A wrong argument count, type or size, launch shape or cluster, named (nothing reaches the driver).
        CudaError
            The driver refused the launch.
        """
        # The hot path of every launch: the same shape objects as last time (ints from the caller's constants are)
        # need no work; the same argument objects as last time, only ArgPacker.pack's per-launch checks.
        last = self._last_shape
        if (grid is last[0] and block is last[1] and shared_mem is last[2] and stream is last[3]
                and cluster is last[4]):
            lc = self._last_config
        else:
            key: Any = (grid, block, shared_mem, stream, cluster)  # the key holds the stream, so its handle stays valid
            try:
                lc = self._configs[key]
            except KeyError:
                lc = self._remember_config(grid, block, shared_mem, stream, cluster)
            except TypeError:  # a list shape is not hashable (and may change): checked every time, not remembered
                lc, key = self._launch_config(grid, block, shared_mem, cluster, stream), None
            if key is not None:
                self._last_shape, self._last_config = key, lc
        params = self.packer.pack(args)
        code, = _launch_kernel_ex(lc, self._function, params, 0)
        if code:
            raise cuda_error("cuLaunchKernelEx", code)

    def _remember_config(self, grid, block, shared_mem, stream, cluster):
        lc = self._launch_config(grid, block, shared_mem, cluster, stream)
        if len(self._configs) >= 64:
            self._configs.clear()
        self._configs[(grid, block, shared_mem, stream, cluster)] = lc
        return lc

    def prepare(self, config: LaunchConfig, *args, stream: Stream | None = None, names=None) -> PreparedLaunch:
        """A launch of these arguments in this configuration, checked in full now (as `launch` checks), whose calls
        skip every check but those of the values they change: see PreparedLaunch. `names`: one name per parameter,
        for keyword updates."""
        return PreparedLaunch(self, config, args, stream=stream, names=names)


class PreparedLaunch:
    """`kernel.prepare(config, *args)`: the arguments packed once into a buffer of their own (not the kernel's
    ordinary packer) and the CUlaunchConfig built once, both checked in full as an ordinary launch is.

    `prepared()` launches again as it is: cuLaunchKernelEx and nothing else. `prepared(*args)` takes the whole
    argument list and rewrites only the positions whose object is not the one held (array pointers, scalars, maps);
    `prepared(name=value)` rewrites named ones (`names=` at prepare). A changed value is checked for its type and
    size (ArgPacker.refresh) and nothing else; `update(...)` refreshes without launching.

    The fast path's contract, where the ordinary launch checks at every call: what it holds is not looked at again.
    A DeviceBuffer closed after it was given here is not noticed; a device array's address is read when the array
    is given (pass a tensor again after resizing it in place); the stream and the launch shape are fixed."""

    __slots__ = ("kernel", "config", "stream", "names", "_lc", "_function", "_packer", "_params", "_args")

    def __init__(self, kernel: Launches, config: LaunchConfig, args, *, stream: Stream | None = None, names=None):
        if not isinstance(config, LaunchConfig):
            raise LaunchError(f"{kernel.name}: prepare takes a LaunchConfig (LaunchConfig.make(grid, block, "
                              f"shared_mem, cluster)), got {type(config).__name__}")
        self.kernel, self.config, self.stream = kernel, config, stream  # held: the module and the stream stay valid
        self.names: dict[str, int] = {}
        if names is not None:
            names = tuple(names)
            if len(names) != len(kernel.params) or len(set(names)) != len(names) or \
                    not all(isinstance(n, str) for n in names):
                raise LaunchError(f"{kernel.name}: names must be {len(kernel.params)} distinct names, one per "
                                  f"parameter, got {names!r}")
            self.names = {n: i for i, n in enumerate(names)}
        self._lc = kernel._launch_config(config.grid, config.block, config.shared_mem, config.cluster, stream)
        self._function = kernel._function
        self._packer = ArgPacker(kernel.name, kernel.params)
        self._params = self._packer.pack(args)  # every check of an ordinary launch's first pack
        self._args = list(args)  # held: by-value objects' bytes are what kernelParams points at

    def update(self, *args, **changes) -> None:
        """Rewrite the arguments that changed: all of them given in order (each compared by identity with the one
        held), or by name. Each changed value is checked for its type and size only."""
        held = self._args
        if args:
            if len(args) != len(held):
                raise LaunchError(f"{self.kernel.name}: a prepared launch takes all {len(held)} argument(s) or "
                                  f"named ones, got {len(args)}")
            refresh = self._packer.refresh
            for i, arg in enumerate(args):
                if arg is not held[i]:
                    refresh(i, arg)
                    held[i] = arg
        for name, arg in changes.items():
            if name not in self.names:
                raise LaunchError(f"{self.kernel.name}: no parameter named {name!r}; "
                                  + (f"names: {', '.join(self.names)}" if self.names else "prepare(..., names=) "
                                     "names them"))
            i = self.names[name]
            if arg is not held[i]:
                self._packer.refresh(i, arg)
                held[i] = arg

    def __call__(self, *args, **changes) -> None:
        """Launch, after rewriting what changed (see update)."""
        if args or changes:
            self.update(*args, **changes)
        code, = _launch_kernel_ex(self._lc, self._function, self._params, 0)
        if code:
            raise cuda_error("cuLaunchKernelEx", code)

    @property
    def image(self):
        """The packed parameter bytes (a view of the buffer the launches read)."""
        return self._packer.image

    @property
    def arguments(self) -> tuple:
        return tuple(self._args)

    def __repr__(self) -> str:
        return f"PreparedLaunch({self.kernel.name!r}, {self.config})"
