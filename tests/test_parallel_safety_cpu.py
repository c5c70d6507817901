"""What several test processes share when scripts/gpu-check spreads the tests over pytest-xdist workers: the NVRTC
cache (each kernel compiled once, never read half-written) and the figure file (whole lines, none lost)."""

from __future__ import annotations

import json
import multiprocessing
import sys
import threading

import pytest

from drvtma.runtime import compiler, figures

SRC = 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = 7; }\n'


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRVTMA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: (13, 0))  # the key only; nothing is compiled here
    compiler.clear_memory_cache()
    yield tmp_path / "cache"
    compiler.clear_memory_cache()


def test_a_compile_waits_for_the_process_compiling_it_and_reads_its_cubin(fresh_cache, monkeypatch):
    def no_nvrtc(*args):
        raise AssertionError("compiled again: the waiting caller should have read the other's cubin")

    monkeypatch.setattr(compiler, "_nvrtc_compile", no_nvrtc)
    key = compiler.cache_key(SRC.encode(), "k.cu", compiler.build_options(compiler.DEFAULT_ARCH))
    got = {}
    with compiler._compile_lock(fresh_cache, key):  # another worker is compiling this kernel
        waiter = threading.Thread(target=lambda: got.setdefault("cubin", compiler.compile_cubin(SRC, name="k.cu")))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive(), "compile_cubin did not wait for the lock"
        compiler._write_atomic(fresh_cache / f"{key}.cubin", b"\x7fELF-from-the-other-worker")
    waiter.join(10)
    assert got["cubin"] == b"\x7fELF-from-the-other-worker"
    assert sorted(p.name for p in fresh_cache.iterdir()) == [f".lock-{key[:2]}", f"{key}.cubin"]  # no temp left


def test_a_compile_error_releases_the_lock(fresh_cache, monkeypatch):
    from drvtma.errors import NvrtcError

    def broken(text, name, options):
        raise NvrtcError("NVRTC failed to compile k.cu", source_name=name, options=options)

    monkeypatch.setattr(compiler, "_nvrtc_compile", broken)
    for _ in range(2):  # the second call would block forever on a lock the first left held
        with pytest.raises(NvrtcError) as info:
            compiler.compile_cubin(SRC, name="k.cu")
        assert info.value.__context__ is None  # not "raised while handling" the lock's set-up
    assert not list(fresh_cache.glob("*.cubin"))


def _append_figures(path: str, worker: int, n: int) -> None:
    import os

    os.environ["DRVTMA_REPORT_JSONL"] = path
    for i in range(n):
        figures.record_figure({"test": "append", "worker": worker, "i": i, "pad": "x" * (20000 + 97 * i)},
                              echo=False)


@pytest.mark.skipif(sys.platform == "win32", reason="fork start method")
def test_concurrent_figure_lines_arrive_whole(tmp_path):
    """Lines longer than any write buffer, from 4 processes at once: every one parses, none is missing."""
    path = tmp_path / "figures.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_figures, args=(str(path), w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted((f["worker"], f["i"]) for f in lines) == [(w, i) for w in range(4) for i in range(40)]


def test_record_figure_creates_the_file_and_appends(tmp_path, monkeypatch):
    path = tmp_path / "new.jsonl"
    monkeypatch.setenv("DRVTMA_REPORT_JSONL", str(path))
    figures.record_test("one", n=1)
    figures.record_test("two", n=2)
    assert [json.loads(line)["test"] for line in path.read_text().splitlines()] == ["one", "two"]
