"""Every `drvtma` command in a code block of the README and docs/ runs as written, here on the CPU, in a folder that
holds what the blocks name (a map file, the kernels of "your own files", shard reports, a reproducer): exit 0; 1
where the docs say a command exits 1 while the bug is there; 3 with one sentence on a machine without a GPU (or
without CUPTI). Never a usage error (2), never a traceback. A kernel-layout line a block prints after its command
is the command's own output."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a minute of subprocesses (a campaign of 500 cases, a reproducer): CI's slow step

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SPEC = {"dtype": "float16", "shape": [64, 64], "box": [64, 64]}
COMMANDS = ("drvtma ", "nvcc ")
# A command the docs say exits 1 (a reproducer that still fails), by its start
EXIT_1 = ("drvtma repro ",)
# A kernel of your own, as docs/testing-your-kernel.md names it: the NumPy kernels of tests/support/byo_kernels.py
USER_KERNELS = "from support.byo_kernels import load_images as run, store\n"


def blocks() -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """(where, [(command, the output lines printed after it)]) of each fenced block holding a drvtma command."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in re.finditer(r"^```([a-z]*)\n(.*?)^```", text, re.S | re.M):
            if m.group(1) not in ("", "bash", "sh", "console"):
                continue
            lines, steps, i = m.group(2).splitlines(), [], 0
            while i < len(lines):
                line = lines[i].strip()
                if line.startswith(COMMANDS):
                    while line.endswith("\\") and i + 1 < len(lines):
                        i += 1
                        line = line[:-1].rstrip() + " " + lines[i].strip()
                    steps.append((re.sub(r"\s+#.*$", "", line), []))
                elif steps and line and not line.startswith(("#", "JOB=", "set ", "mkdir ")):
                    steps[-1][1].append(line)
                i += 1
            if any(c.startswith("drvtma ") for c, _ in steps):
                line_no = text[:m.start()].count("\n") + 1
                out.append((f"{doc.relative_to(ROOT)}:{line_no}", steps))
    return out


BLOCKS = blocks()


def _drvtma(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "drvtma", *args], capture_output=True, text=True, cwd=folder,
                          env=_env(folder), timeout=300)


def _env(folder: Path) -> dict:
    # no GPU even where there is one: the blocks run as on a machine without one (a CPU test), and the campaign
    # blocks' real sizes (200,000 examples) do not run for minutes on a GPU machine
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]), SLURM_ARRAY_TASK_ID="1",
                SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_COUNT="2", SLURM_ARRAY_JOB_ID="7", CUDA_VISIBLE_DEVICES="")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("docs")
    (d / "my_map.json").write_text(json.dumps(SPEC))
    for item in (ROOT / "tests" / "data" / "byo").iterdir():  # row_copy.cu, copy_out.cuh, include/, nvcc_tile_copy.cu
        (shutil.copytree if item.is_dir() else shutil.copy)(item, d / item.name)
    (d / "tests").symlink_to(ROOT / "tests")
    (d / "path" / "to").mkdir(parents=True)
    (d / "path" / "to" / "file.py").write_text(USER_KERNELS)
    (d / "train.py").write_text("print('training')\n")
    # a reproducer of a kernel with a bug (docs: `drvtma repro DIR/repro-...json`)
    (d / "path" / "to" / "buggy.py").write_text("from support.byo_kernels import off_by_one as run\n")
    done = _drvtma(d, "fuzz", "loads", "--kernel", "path/to/buggy.py:run", "--examples", "40", "--seed", "5",
                   "--no-db", "--quiet", "--max-shrinks", "1", "--out", "DIR")
    assert done.returncode == 1 and list((d / "DIR").glob("repro-*.json")), done.stderr[-2000:]
    # the shard reports a Slurm merge reads, where the recipe puts them
    run = d / "shared" / "drvtma-fuzz" / "run-20260101"
    (d / "shared" / "drvtma-fuzz" / "db").mkdir(parents=True)
    for k in range(2):
        done = _drvtma(d, "fuzz", "loads", "--fake-device", "--no-db", "--quiet", "--examples", "16", "--seed", "7",
                       "--shard", f"{k}/2", "--out", str(run / f"shard-{k}"))
        assert done.returncode == 0, done.stderr[-2000:]
    return d


def test_the_reader_finds_the_doc_commands():
    found = [c for _, steps in BLOCKS for c, _ in steps]
    assert len(found) >= 10 and any(c.startswith("drvtma fuzz merge") for c in found)
    assert {"docs/campaigns.md", "docs/testing-your-kernel.md", "docs/audit.md"} <= {w.split(":")[0] for w, _ in BLOCKS}


@pytest.mark.parametrize("where, steps", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_every_doc_command_runs(where, steps, folder):
    for command, printed in steps:
        if command.startswith("nvcc ") and shutil.which("nvcc") is None:
            pytest.skip("nvcc is not on the PATH (the block builds a cubin with it)")
        line = command.replace("/shared", str(folder / "shared"))
        repro = sorted((folder / "DIR").glob("repro-*.json"))[0]
        line = re.sub(r"DIR/repro-\S+\.json", str(repro), line)
        exe = f'"{sys.executable}" -m drvtma' if line.startswith("drvtma ") else "nvcc"
        done = subprocess.run(["bash", "-c", exe + line[line.index(" "):]], capture_output=True, text=True,
                              cwd=folder, env=_env(folder), timeout=300)
        err = done.stderr.strip()
        assert "Traceback" not in done.stdout + err, f"{where}: {command}\n{err[-2000:]}"
        if done.returncode == 3:  # no GPU (or no CUPTI) here: one sentence that says so
            assert len(err.splitlines()) == 1 and re.search(r"GPU|driver|CUPTI|cupti", err), (where, command, err)
            return  # what follows in the block needs what this one needed
        expected = 1 if command.startswith(EXIT_1) else 0
        assert done.returncode == expected, f"{where}: {command}: exit {done.returncode}\n{err[-1500:]}"
        for shown in printed:  # a kernel's layout line, as `drvtma compile` prints it
            head = shown.split("; TMA")[0]
            if re.match(r"^\w+: parameters ", head):
                assert head in done.stdout, f"{where}: {command} printed\n{done.stdout}\nnot\n{shown}"
