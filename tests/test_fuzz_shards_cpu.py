"""Campaigns split into shards and merged, without a GPU (the oracle stands in for the device): `--shard K/N` and
its Slurm / Kubernetes forms, `drvtma fuzz merge` equal to the unsharded run (planted bugs included) and its
refusals, the shared example database (a folder, a real Redis server), pytest-xdist's GPU per worker, and the
recipes of docs/campaigns.md run as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drvtma.cli.main import main
from drvtma.fuzz import loads as fuzz_loads
from drvtma.fuzz.encode import EncodeSession
from drvtma.fuzz.shard import parse_shard
from drvtma.fuzz.targets import get_target
from drvtma.testing.children import child_env
from drvtma.testing.plugin import pin_xdist_worker, worker_gpu

ROOT = Path(__file__).resolve().parents[1]
RECIPES = (ROOT / "docs" / "campaigns.md").read_text()


def view(report: dict) -> dict:
    """What a merged report must share with the unsharded one: counts, labels, failures (index and first line)."""
    return {"counts": [report[k] for k in ("target", "seed", "cases", "size", "mismatches", "known_failures")],
            "by": report["by"], "failures": [(f["case_index"], f["detail"]) for f in report["failures"]]}


def fuzz(*args, out, capsys=None) -> tuple[int, dict]:
    rc = main(["fuzz", *args, "--fake-device", "--quiet", "--out", str(out)])
    if capsys is not None:
        capsys.readouterr()
    return rc, json.loads(next(Path(out).glob("*-report.json")).read_text())


@pytest.fixture
def loads_bug(monkeypatch):
    """A planted oracle bug: the first byte of every box flipped in its lowest bit."""
    real = fuzz_loads.expected_images

    def buggy(spec, global_bytes, coords, *, box_offset, **kwargs):
        images = real(spec, global_bytes, coords, box_offset=box_offset, **kwargs).copy()
        images[:, box_offset] ^= 1
        return images

    monkeypatch.setattr(fuzz_loads, "expected_images", buggy)


@pytest.fixture
def encode_bug(monkeypatch):
    """A planted bug: rank-3 maps reported as the driver's refusal."""
    real = EncodeSession.check_one

    def buggy(self, spec):
        outcome = real(self, spec)
        if spec.rank == 3:
            outcome.ok, outcome.detail = False, "planted: rank 3 refused"
        return outcome

    monkeypatch.setattr(EncodeSession, "check_one", buggy)


# ---- --shard: its forms and the environment of Slurm and Kubernetes

def test_shard_forms_read_slurm_and_kubernetes(monkeypatch):
    assert parse_shard("2/4") == (2, 4)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "5")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "4")  # --array=4-7
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    assert parse_shard("slurm") == (1, 4)
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "3")
    assert parse_shard("k8s/4") == (3, 4)
    for bad in ("4/4", "1/0", "x/4", "k8s/3"):
        with pytest.raises(ValueError):
            parse_shard(bad)
    monkeypatch.delenv("SLURM_ARRAY_TASK_COUNT")
    with pytest.raises(ValueError, match="SLURM_ARRAY_TASK_COUNT"):
        parse_shard("slurm")


@pytest.mark.parametrize("array, ids, first, last, step", [
    ("0-3", [0, 1, 2, 3], 0, 3, 1), ("4-7%2", [4, 5, 6, 7], 4, 7, 1), ("0-6:2", [0, 2, 4, 6], 0, 6, 2),
    ("1-13:4", [1, 5, 9, 13], 1, 13, 4)])
def test_every_task_of_a_slurm_range_is_one_shard(monkeypatch, array, ids, first, last, step):
    """--array ranges with a step or a task limit: each task its own shard, 0..N-1, none twice, none missing."""
    for name, value in (("MIN", first), ("MAX", last), ("STEP", step), ("COUNT", len(ids))):
        monkeypatch.setenv(f"SLURM_ARRAY_TASK_{name}", str(value))
    shards = []
    for task in ids:
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", str(task))
        shards.append(parse_shard("slurm"))
    assert shards == [(k, len(ids)) for k in range(len(ids))], array


def test_a_slurm_list_array_is_refused_by_every_task(monkeypatch):
    """--array=1,3,8: no place in a range for any task (a shard would be missing or run twice): each task says so."""
    for name, value in (("MIN", 1), ("MAX", 8), ("STEP", 1), ("COUNT", 3)):
        monkeypatch.setenv(f"SLURM_ARRAY_TASK_{name}", str(value))
    for task in (1, 3, 8):
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", str(task))
        with pytest.raises(ValueError, match="range"):
            parse_shard("slurm")


@pytest.mark.parametrize("target, bug, examples", [("loads", "loads_bug", 48), ("encode", "encode_bug", 300)])
def test_four_shards_merge_to_the_unsharded_campaign(request, tmp_path, capsys, target, bug, examples):
    request.getfixturevalue(bug)
    common = (target, "--seed", "11", "--examples", str(examples), "--no-db", "--no-shrink")
    rc, whole = fuzz(*common, out=tmp_path / "whole", capsys=capsys)
    assert rc == 1 and whole["mismatches"] > 1  # the planted bug is found
    for k in range(4):
        fuzz(*common, "--shard", f"{k}/4", out=tmp_path / f"shard{k}", capsys=capsys)
    assert main(["fuzz", "merge", *(str(tmp_path / f"shard{k}") for k in range(4)), "--out",
                 str(tmp_path / "merged")]) == 1
    text = capsys.readouterr().out
    merged = json.loads((tmp_path / "merged" / f"{target}-report.json").read_text())
    assert view(merged) == view(whole)
    assert sorted(merged["batches"]) == sorted(whole["batches"])  # every batch once
    assert [row["shard"] for row in merged["per_shard"]] == [0, 1, 2, 3] and "4 shards" in text
    per = get_target(target).cases_per_batch  # shard k ran batches k, k + 4, ...
    assert all(f["case_index"] // per % 4 == f["shard"] for f in merged["failures"])
    assert len(merged["reproducers"]) == len(merged["failures"])
    md = (tmp_path / "merged" / f"{target}-report.md").read_text()
    assert "## Shards" in md and "## Failures" in md and merged["reproducers"][0] in md


def _shard_reports(tmp_path, capsys, second_seed=3):
    for k in range(2):
        fuzz("encode", "--seed", str(second_seed if k else 3), "--examples", "40", "--no-db", "--shard", f"{k}/2",
             out=tmp_path / f"s{k}", capsys=capsys)
    return [tmp_path / "s0", tmp_path / "s1"]


@pytest.mark.parametrize("change, reason", [
    ("seed", "differ in seed"), ("version", "differ in drvtma_version"), ("target", "differ in target"),
    ("missing", "shard(s) 1 of 2 missing"), ("twice", "appears twice"), ("not-json", "not a readable JSON report"),
    ("nothing", "holds no *-report.json")])
def test_merge_refuses_reports_of_other_campaigns_with_the_reason(tmp_path, capsys, change, reason):
    dirs = _shard_reports(tmp_path, capsys, 4 if change == "seed" else 3)
    second = next(dirs[1].glob("*.json"))
    d = json.loads(second.read_text())
    if change in ("version", "target"):
        d["drvtma_version" if change == "version" else "target"] = "0.0.0" if change == "version" else "loads"
        second.write_text(json.dumps(d))
    dirs = {"missing": dirs[:1], "twice": [dirs[0], dirs[0]], "nothing": [tmp_path]}.get(change, dirs)
    if change == "not-json":
        second.write_text("{")
    assert main(["fuzz", "merge", *map(str, dirs), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "[fuzz_merge]" in err and reason in err and len(err.strip().splitlines()) == 1


# ---- the shared example database

def _replayed_by_a_later_shard(tmp_path, capsys, monkeypatch, db: str) -> None:
    """Shard 0 finds and saves a failure in `db`; shard 3, started later on another 'node' (another local
    database), replays it before its own cases."""
    common = ("loads", "--seed", "2", "--examples", "64", "--db", db, "--max-shrinks", "1", "--shrink-seconds", "5")
    monkeypatch.setenv("DRVTMA_FUZZ_DB", str(tmp_path / "node-a"))
    rc, first = fuzz(*common, "--shard", "0/4", out=tmp_path / "a", capsys=capsys)
    assert rc == 1 and first["failures"][0]["case_index"] is not None
    monkeypatch.setenv("DRVTMA_FUZZ_DB", str(tmp_path / "node-b"))
    rc, later = fuzz(*common, "--shard", "3/4", out=tmp_path / "b", capsys=capsys)
    assert rc == 1 and later["known_failures"] >= 1
    assert later["failures"][0]["case_index"] is None and later["failures"][0]["shard"] == 3  # replayed first


def test_a_failure_saved_in_a_shared_folder_replays_first_in_a_later_shard(tmp_path, capsys, monkeypatch, loads_bug):
    _replayed_by_a_later_shard(tmp_path, capsys, monkeypatch, str(tmp_path / "shared-db"))


@pytest.fixture
def redis_url(tmp_path):
    """A real redis-server on 127.0.0.1 (a free port, nothing saved to disk), stopped after the test."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    pytest.importorskip("redis", reason="the redis package is not installed (pip install 'drvtma[redis]')")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_failure_saved_in_redis_replays_first_in_a_later_shard(tmp_path, capsys, monkeypatch, loads_bug,
                                                                   redis_url):
    _replayed_by_a_later_shard(tmp_path, capsys, monkeypatch, redis_url)


def test_an_unreachable_redis_is_named_before_any_case(tmp_path, capsys):
    pytest.importorskip("redis", reason="the redis package is not installed (pip install 'drvtma[redis]')")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{s.getsockname()[1]}/0"  # bound, never listening: refused
    assert main(["fuzz", "loads", "--examples", "4", "--seed", "1", "--fake-device", "--quiet", "--db", url,
                 "--out", str(tmp_path)]) == 2
    assert "no Redis answers there" in capsys.readouterr().err


# ---- pytest-xdist: a GPU per worker

def test_xdist_workers_get_gpus_round_robin(monkeypatch):
    assert [worker_gpu(f"gw{i}", ["0", "1", "2"]) for i in range(4)] == ["0", "1", "2", "0"]
    assert worker_gpu("gw3", ["0"]) is None and worker_gpu(None, ["0", "1"]) is None  # one GPU: shared
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert pin_xdist_worker() == "5" and os.environ["CUDA_VISIBLE_DEVICES"] == "5"


@pytest.mark.slow
def test_the_xdist_recipe_gives_each_worker_a_gpu_and_one_database(tmp_path):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    line = re.search(r"^pytest -n (\d+) tests/$", RECIPES, re.M)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_where.py").write_text(
        "import os, pytest\nfrom hypothesis import settings\n"
        "@pytest.mark.parametrize('i', range(8))\ndef test_where(i):\n"
        "    with open(os.path.join(os.path.dirname(__file__), os.environ['PYTEST_XDIST_WORKER']), 'w') as f:\n"
        "        f.write(os.environ['CUDA_VISIBLE_DEVICES'] + ' ' + str(settings().database))\n")
    argv = [sys.executable, "-m", "pytest", "-p", "drvtma.testing.plugin", "-p", "no:cacheprovider", "-q",
            *line.group(0).split()[1:]]
    # a fresh pytest, not a worker: under `pytest -n` this test's own PYTEST_XDIST_* would make it one
    env = {k: v for k, v in child_env(CUDA_VISIBLE_DEVICES="0,1,2,3").items() if not k.startswith("PYTEST_XDIST")}
    run = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    seen = {p.name: p.read_text().split(" ", 1) for p in (tmp_path / "tests").glob("gw*")}
    assert {w: gpu for w, (gpu, _) in seen.items()} == {f"gw{i}": str(i) for i in range(len(seen))}
    assert len({db for _, db in seen.values()}) == 1  # one hypothesis database for every worker


# ---- docs/campaigns.md, run as written (locally, --fake-device, a folder for /shared, fewer examples)

def _bash(command: str, tmp_path: Path, **env) -> subprocess.Popen:
    """`command` in bash with `drvtma` as this tree's CLI on the fake device, /shared and the Redis URL local."""
    command = (command.replace("/shared", str(tmp_path / "shared")).replace("200000", "48")
               .replace("redis://drvtma-redis:6379/0", str(tmp_path / "shared" / "db")))
    shim = ('drvtma() { if [ "$2" = merge ]; then "$PY" -m drvtma "$@"; else "$PY" -m drvtma "$@" --fake-device; '
            'fi; }\n')
    (tmp_path / "shared").mkdir(exist_ok=True)  # the shared volume: mounted before any job runs
    return subprocess.Popen(["bash", "-c", shim + command], env=child_env(PY=sys.executable, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait(procs) -> None:
    for proc in procs:
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output


def _unsharded(tmp_path: Path) -> dict:
    _wait([_bash("drvtma fuzz loads --seed 20260101 --examples 200000 --no-db --quiet --out /shared/whole",
                 tmp_path)])
    return json.loads((tmp_path / "shared" / "whole" / "loads-report.json").read_text())


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", RECIPES, re.S)


@pytest.mark.slow
def test_the_slurm_recipe_merges_to_the_unsharded_campaign(tmp_path):
    script = next(b for b in _blocks("bash") if "#SBATCH --array=0-3" in b)
    merge = next(b for b in _blocks("bash") if "#SBATCH" in b and "drvtma fuzz merge" in b)
    _wait([_bash(script, tmp_path, SLURM_ARRAY_TASK_ID=str(k), SLURM_ARRAY_TASK_MIN="0",
                 SLURM_ARRAY_TASK_COUNT="4", SLURM_ARRAY_JOB_ID="77") for k in range(4)])
    _wait([_bash(merge, tmp_path)])
    merged = json.loads((tmp_path / "shared/drvtma-fuzz/run-20260101/merged/loads-report.json").read_text())
    assert merged["per_shard"] and len(merged["per_shard"]) == 4
    assert view(merged) == view(_unsharded(tmp_path))


def _k8s_command(manifest: str, job: str) -> str:
    """The shell command of the Job named `job` in a multi-document manifest (its `command: ["sh", "-c", ...]`)."""
    doc = next(d for d in manifest.split("\n---\n") if "kind: Job" in d and f"name: {job}\n" in d)
    command = json.loads(re.search(r"command: (\[.*\])", doc).group(1))
    assert command[:2] == ["sh", "-c"]
    return command[2]


@pytest.mark.slow
def test_the_kubernetes_recipe_merges_to_the_unsharded_campaign(tmp_path):
    fuzz, merge = _blocks("yaml")[:2]
    assert re.search(r"completionMode: Indexed\n\s+completions: 4\n\s+parallelism: 4", fuzz)
    # a shard that finds a mismatch (exit 1) fails its own index only: the others run on and write their reports
    assert re.search(r"backoffLimitPerIndex: \d+\n\s+podFailurePolicy:\n\s+rules:\n\s+- action: FailIndex\n"
                     r"\s+onExitCodes:\n\s+containerName: fuzz\n\s+operator: In\n\s+values: \[1\]", fuzz)
    assert "accessModes: [ReadWriteMany]" in fuzz and "kind: Service" in fuzz and "name: drvtma-redis" in fuzz
    _wait([_bash(_k8s_command(fuzz, "drvtma-fuzz"), tmp_path, JOB_COMPLETION_INDEX=str(k)) for k in range(4)])
    _wait([_bash(_k8s_command(merge, "drvtma-fuzz-merge"), tmp_path)])
    merged = json.loads((tmp_path / "shared/drvtma-fuzz/run-20260101/merged/loads-report.json").read_text())
    assert view(merged) == view(_unsharded(tmp_path))


def test_the_kubernetes_manifests_are_valid_against_the_api_schemas():
    """Every object of both manifests against Kubernetes' own OpenAPI schemas, offline (kubernetes-validate; CI
    installs it), strict: a misspelt field fails."""
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed (CI installs it)")
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    docs = [d for block in _blocks("yaml")[:2] for d in yaml.safe_load_all(block) if d]
    assert [d["kind"] for d in docs] == ["PersistentVolumeClaim", "Deployment", "Service", "Job", "Job"]
    for d in docs:
        kv.validate(d, "1.33", strict=True)  # raises ValidationError naming the field
