"""Sharding a campaign over the GPUs of one host: one subprocess per shard, pinned with CUDA_VISIBLE_DEVICES, each
writing the JSON report `drvtma fuzz --shard K/N` writes, merged as `drvtma fuzz merge` merges them (one mechanism
for one host, a Slurm array or a Kubernetes Indexed Job).

Subprocesses rather than a process pool or pytest-xdist: a CUDA context does not survive fork, the device must be
chosen before the driver starts (an environment variable per process), and a shard that faults its context (a
sticky error) ends only itself. Shard k of n runs batches k, k + n, ... of the same seed (`run_campaign`), so the
shards never draw the same case, and the merged result of n shards equals one process's for a fixed --examples.

`python -m drvtma.fuzz.shard JOB.pickle OUT_DIR` runs one shard (what the parent starts).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import settings
from ..testing.children import child_env
from .campaign import CampaignResult, run_campaign
from .merge import merge_reports
from .report import write_reports
from .shrink import open_database
from .targets import get_target


def parse_devices(text: str | None) -> list[str] | None:
    """'all' -> every visible device, '0,1' -> those, None/'' -> no sharding (this process)."""
    if not text:
        return None
    if text.strip() == "all":
        visible = settings.VISIBLE_DEVICES.get()
        if visible:
            return visible
        from cuda.bindings import driver as cu

        from ..runtime.driver import call

        call(cu.cuInit, 0)
        return [str(i) for i in range(int(call(cu.cuDeviceGetCount)))]
    devices = settings.names(text)
    if not devices:
        raise ValueError(f"--devices {text!r}: give 'all' or device numbers such as 0,1")
    return devices


SHARD_FORMS = "K/N (0 <= K < N), 'slurm' or 'k8s/N'"


def parse_shard(text: str) -> tuple[int, int]:
    """(k, n) from --shard: 'K/N'; 'slurm' (K = (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP,
    N = SLURM_ARRAY_TASK_COUNT); 'k8s/N' (K = JOB_COMPLETION_INDEX of a Kubernetes Indexed Job). ValueError says
    why."""
    head, _, tail = text.strip().partition("/")
    if head == "slurm" and not tail:
        task, count = settings.SLURM_TASK_ID.get(), settings.SLURM_TASK_COUNT.get()
        if task is None or count is None:
            raise ValueError("'slurm' reads SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, and one is unset "
                             "(run it in a job array: sbatch --array=0-3)")
        k, n = _slurm_index(task, count)
    elif head == "k8s":
        k = settings.JOB_COMPLETION_INDEX.get()
        if k is None:
            raise ValueError("'k8s/N' reads JOB_COMPLETION_INDEX, and it is unset (run it in an Indexed Job)")
        n = _whole(tail)
    else:
        k, n = _whole(head), _whole(tail)
    if not 0 <= k < n:
        raise ValueError(f"shard {k} of {n}: give {SHARD_FORMS}")
    return k, n


SLURM_ARRAYS = "a range with an optional step and task limit (--array=0-3, 1-8, 0-14:2, 0-99%10)"


def _slurm_index(task: int, count: int) -> tuple[int, int]:
    """The shard of an array task: its place in the range. An array given as a list (--array=1,3,8) has no place
    to compute, and every task refuses it alike (its first, last and count do not make a range of that step)."""
    first, last, step = settings.SLURM_TASK_MIN.get(), settings.SLURM_TASK_MAX.get(), settings.SLURM_TASK_STEP.get()
    regular = step >= 1 and (last is None or (last - first) == step * (count - 1))
    if not regular or (task - first) % step:
        raise ValueError(f"'slurm' takes {SLURM_ARRAYS}; this array (first {first}, last {last}, step {step}, "
                         f"{count} tasks) is not one: give the shards as a range")
    return (task - first) // step, count


def _whole(text: str) -> int:
    if not text.strip().isdigit():
        raise ValueError(f"{text!r} is not a whole number: give {SHARD_FORMS}")
    return int(text)


def shard_timeout(*, seconds=None, examples=None, shrink=True, max_shrinks=5, shrink_seconds=60.0, **_) -> float:
    """How long a shard may take before it is stopped: its time budget (or an hour for a case count), the
    shrinking it may do, and 5 minutes for start-up and compiles."""
    budget = float(seconds) if seconds else 3600.0
    return budget + (max_shrinks * shrink_seconds if shrink else 0.0) + 300.0


def run_sharded(target_name: str, options: dict, devices: list[str], *, database_path=None, **campaign) -> \
        CampaignResult:
    """One subprocess per entry of `devices` (the same device may appear twice: two shards on one GPU), their
    reports merged (`drvtma.fuzz.merge`)."""
    n = len(devices)
    with tempfile.TemporaryDirectory(prefix="drvtma-fuzz-") as tmp:
        procs = []
        for k, device in enumerate(devices):
            job = Path(tmp) / f"job{k}.pickle"
            out = Path(tmp) / f"shard{k}"
            job.write_bytes(pickle.dumps({"target": target_name, "options": options, "shard": (k, n),
                                          "device": device, "database": database_path, **campaign}))
            procs.append((k, out, subprocess.Popen([sys.executable, "-m", "drvtma.fuzz.shard", str(job), str(out)],
                                                   env=child_env(CUDA_VISIBLE_DEVICES=device), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                   text=True)))
        errors = []
        deadline = time.monotonic() + shard_timeout(**campaign)
        for k, out, proc in procs:
            try:
                stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for _, _, other in procs:
                    other.kill()
                raise RuntimeError(f"shard {k} (device {devices[k]}) still running after "
                                   f"{shard_timeout(**campaign):.0f} s: every shard stopped") from None
            if proc.returncode != 0 or not out.exists():
                errors.append(f"shard {k} (device {devices[k]}) exited {proc.returncode}:\n{stderr[-2000:]}")
                continue
        if errors:
            raise RuntimeError("\n\n".join(errors))
        return merge_reports([out for _, out, _ in procs])


def run_job(job: dict) -> CampaignResult:
    target = get_target(job.pop("target"))
    device = job.pop("device")
    path = job.pop("database")
    database = open_database(path) if path is not None else None
    result = run_campaign(target, job.pop("options"), database=database, **job)
    result.devices = [device]
    return result


def main(argv: list[str]) -> int:
    job_path, out = argv
    write_reports(run_job(pickle.loads(Path(job_path).read_bytes())), Path(out), [])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
