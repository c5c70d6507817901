"""CUDA C++ to cubin with NVRTC, behind a persistent cache. Needs no GPU."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from .. import settings
from ..errors import ArgumentError, NvrtcError
from . import includes

DEFAULT_ARCH = "sm_90a"
_CACHE_FORMAT = "1"  # bump when what a cache entry holds changes
_memory_cache: dict[str, bytes] = {}
_memory_lock = threading.Lock()


def cu_dir() -> Path:
    """The folder of drvtma's kernels: $DRVTMA_CU_DIR, else the copy shipped inside the package, else the repo's."""
    override = settings.CU_DIR.get()
    if override:
        return Path(override)
    here = Path(__file__).resolve().parents[1]  # the drvtma package
    for candidate in (here / "cu", here.parent / "cu"):  # installed wheel, then source checkout
        if (candidate / "include" / "drvtma").is_dir():
            return candidate
    raise FileNotFoundError(f"drvtma's cu/ folder was not found next to {here}; set DRVTMA_CU_DIR")


def include_dir() -> Path:
    return cu_dir() / "include"


def cache_dir() -> Path | None:
    """Where cubins are cached; None when DRVTMA_NO_CACHE is set."""
    if settings.NO_CACHE.get():
        return None
    root = settings.CACHE_DIR.get()
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "drvtma"


@lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return int(major), int(minor)


def _headers_digest(inc: Path) -> str:
    """Every header under cu/include changes the output of every kernel that may include it."""
    h = hashlib.sha256()
    for path in sorted(p for p in inc.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(inc)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def find_source(source: str) -> Path:
    """The kernel file `source` names: a path from the current directory (your own kernel next to your script),
    else a path under cu/ ("b08/pipelines.cu"), else a bare file name found in exactly one of cu/'s room folders
    ("pipelines.cu", or "pipelines": a bare name without its suffix)."""
    if os.path.isabs(source) or Path(source).is_file():
        return _existing(Path(source).absolute(), source)
    root = cu_dir()
    path = root / source
    if path.is_file() or "/" in source:
        return _existing(path, source, here=True)
    names = [source] if Path(source).suffix else [source, f"{source}.cu"]
    found = sorted({p for n in names for p in root.glob(f"*/{n}") if p.parent.name != "include"})
    if len(found) == 1:
        return found[0]
    if found:
        listed = ", ".join(str(p.relative_to(root)) for p in found)
        raise ArgumentError("source_file", "source", source, f"give its folder too: {listed}",
                            f"it names {len(found)} kernels under {root}")
    raise ArgumentError("source_file", "source", source, "give a path, a path under cu/ or a kernel file name "
                        "from one room folder", f"no kernel {source!r} in {Path.cwd()} or under {root} "
                        f"(looked in {root}/*/)")


def _existing(path: Path, source, here: bool = False) -> Path:
    if not path.is_file():
        raise ArgumentError("source_file", "source", str(source), "give an existing .cu file",
                            f"{path} does not exist" + (f" (nor {Path.cwd() / source})" if here else ""))
    return path


def _resolve(source, name: str | None) -> tuple[str, bytes, Path | None]:
    """(source name, source text, its folder) from a Path, a file name (here or under cu/), or the text itself.
    A file of the user's is named by its absolute path: NVRTC finds its quoted includes next to it, as nvcc does."""
    if isinstance(source, str) and "\n" not in source and source.endswith((".cu", ".cuh")):
        source = find_source(source)
    if isinstance(source, Path):
        path = _existing(source, source).resolve()
        return name or _program_name(path), path.read_bytes(), path.parent
    if not isinstance(source, (str, bytes, bytearray)):
        raise ArgumentError("source_type", "source", type(source).__name__, "give a Path, a .cu file name, or the "
                            "CUDA source text (str or bytes)")
    text = source.encode() if isinstance(source, str) else bytes(source)
    return name or "drvtma_source.cu", text, None


def _program_name(path: Path) -> str:
    """drvtma's own kernels keep their file name (their cache keys and logs do not depend on where it is installed)."""
    try:
        path.relative_to(cu_dir().resolve())
        return path.name
    except ValueError:
        return str(path)


def build_options(arch: str, options=(), defines: dict | None = None, include_dirs=()) -> tuple[str, ...]:
    if not isinstance(arch, str) or not arch.startswith(("sm_", "compute_")):
        raise ArgumentError("compile_option", "arch", arch, "give an architecture such as 'sm_90a'")
    if isinstance(options, (str, bytes)) or not isinstance(options, (tuple, list)) \
            or not all(isinstance(o, str) for o in options):
        raise ArgumentError("compile_option", "options", options, "give a list of option strings, e.g. "
                            "['-lineinfo'] (a bare string would be split into characters)")
    if defines is not None and not isinstance(defines, dict):
        raise ArgumentError("compile_option", "defines", defines, "give a dict such as {'TILE': 64}")
    opts = [f"-arch={arch}", "-std=c++17", *(f"-I{d}" for d in include_dirs), f"-I{include_dir()}"]
    opts += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in sorted((defines or {}).items())]
    opts += list(options)
    return tuple(opts)


def cache_key(text: bytes, name: str, options: tuple[str, ...], user_headers: str = "") -> str:
    """`user_headers`: includes.headers_digest of the user's headers the source includes (none: no part, so the
    keys of drvtma's own kernels stay as they were)."""
    h = hashlib.sha256()
    parts = (_CACHE_FORMAT, name, "%d.%d" % nvrtc_version(), "\0".join(options), _headers_digest(include_dir()))
    for part in parts + ((user_headers,) if user_headers else ()):
        h.update(part.encode() + b"\0")
    h.update(text)
    return h.hexdigest()


def compile_cubin(source, *, name: str | None = None, arch: str = DEFAULT_ARCH, options=(),
                  defines: dict | None = None, include_dirs=(), cache: bool = True) -> bytes:
    """Compile CUDA C++ for `arch` and return the cubin (PTX text for a virtual `compute_XX` arch); cached in memory
    and on disk by everything that matters: the target, and the headers it includes from `include_dirs` (your -I
    folders) and from next to it."""
    name, text, src_dir = _resolve(source, name)
    dirs = includes.include_dirs(include_dirs)
    opts = build_options(arch, options, defines, dirs)
    key = cache_key(text, name, opts, includes.headers_digest(includes.user_headers(text, src_dir or Path.cwd(),
                                                                                     dirs)))
    if cache:
        with _memory_lock:
            hit = _memory_cache.get(key)
        if hit is not None:
            return hit
    folder = cache_dir() if cache else None
    path = folder / f"{key}.cubin" if folder else None
    if path is None:
        cubin = _nvrtc_compile(text, name, opts)
    elif path.is_file():
        cubin = path.read_bytes()
    else:
        assert folder is not None  # path is set only with a folder
        with _compile_lock(folder, key):
            if path.is_file():  # another process compiled it while this one waited
                cubin = path.read_bytes()
            else:
                cubin = _nvrtc_compile(text, name, opts)
                _write_atomic(path, cubin)
    if cache:
        with _memory_lock:
            _memory_cache[key] = cubin
    return cubin


def _compile_quietly(job: dict) -> str | None:
    """One `compile_cubin(**job)` in a worker process: None, or why it failed (the caller's own compile reports it)."""
    try:
        compile_cubin(**job)
        return None
    except Exception as exc:  # noqa: BLE001 (a warm-up: the real compile raises the error with its fix)
        return f"{type(exc).__name__}: {exc}"


def warm_cache(jobs, *, workers: int | None = None) -> int:
    """Compile `jobs` (each a dict of compile_cubin's arguments) into the disk cache on `workers` processes at once
    (default: the CPUs, at most 16), so a benchmark that then builds them one by one finds every cubin cached:
    NVRTC is CPU-bound and single-threaded. Returns how many it compiled; without a disk cache, or for one job,
    it does nothing (the caller compiles as before). A job that fails here fails again, with its message, where
    the caller compiles it."""
    jobs = [dict(j) for j in jobs]
    workers = min(len(jobs), workers or min(16, os.cpu_count() or 1))
    if cache_dir() is None or workers < 2:
        return 0
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: the caller may hold a CUDA context, which a forked child must not inherit
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        failed = list(pool.map(_compile_quietly, jobs))
    return sum(f is None for f in failed)


def clear_memory_cache() -> None:
    with _memory_lock:
        _memory_cache.clear()


@contextlib.contextmanager
def _compile_lock(folder: Path, key: str):
    """Held while one process compiles an entry, so processes sharing the cache (pytest-xdist workers) compile each
    kernel once: the others wait, then read its cubin. One of 256 lock files by the key's first byte. Without
    fcntl (Windows) or a writable folder, no lock: a kernel may be compiled twice, never read half-written."""
    fd = None
    try:
        import fcntl

        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / f".lock-{key[:2]}", os.O_RDWR | os.O_CREAT, 0o644)
    except (ImportError, OSError):
        pass
    if fd is None:  # outside the except clause: a compile error must not read as raised while handling this one
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released at close, and by the kernel if this process dies
        yield
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    """Publish a cache entry with a rename, so readers never see half a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".cubin")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:  # a read-only cache folder costs speed, never correctness
        pass


def _nvrtc_compile(text: bytes, name: str, options: tuple[str, ...]) -> bytes:
    from cuda.bindings import nvrtc

    def check(result, what):
        code, *values = result
        if code != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, msg = nvrtc.nvrtcGetErrorString(code)
            raise NvrtcError(f"{what}: {code.name} ({msg.decode()})", source_name=name, options=options)
        return values[0] if len(values) == 1 else values

    prog = check(nvrtc.nvrtcCreateProgram(text, name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        encoded = [o.encode() for o in options]
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        size = check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        # NVRTC writes into the buffer: a bytearray, never bytes. `b" " * 1` (an empty log has size 1) is CPython's
        # shared one-byte object, and writing its NUL corrupted every b" " of the process (torch's import then
        # failed after a compile).
        log = bytearray(size)
        check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
        log_text = bytes(log).rstrip(b"\0 ").decode(errors="replace")
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcError(_format_failure(name, text, options, log_text), source_name=name, options=options,
                             log=log_text)
        if any(o.startswith("-arch=compute_") for o in options):  # a virtual target: PTX, NUL-terminated
            size = check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            ptx = bytearray(size)
            check(nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
            return bytes(ptx)
        size = check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = bytearray(size)
        check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


_LOG_LINE = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?:error|warning|catastrophic error)", re.M)


def _format_failure(name: str, text: bytes, options, log: str, context_lines: int = 2) -> str:
    """The log, then the source lines around each reported line (from the source or a drvtma header)."""
    parts = [f"NVRTC failed to compile {name}", "options: " + " ".join(options), "log:", log]
    shown = set()
    for m in _LOG_LINE.finditer(log):
        file, line = m["file"], int(m["line"])
        if (file, line) in shown:
            continue
        shown.add((file, line))
        lines = _source_lines(file, name, text)
        if not lines:
            continue
        lo, hi = max(1, line - context_lines), min(len(lines), line + context_lines)
        parts.append(f"--- {file}:{line}")
        parts += [f"{'>' if i == line else ' '}{i:5d} | {lines[i - 1]}" for i in range(lo, hi + 1)]
    return "\n".join(parts)


def _source_lines(file: str, name: str, text: bytes) -> list[str]:
    if file == name or Path(file).name == name:
        return text.decode(errors="replace").splitlines()
    path = Path(file) if os.path.isabs(file) else include_dir() / file
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []
