"""drvtma.fuzz without a GPU: choosers that hypothesis replays, the fast oracle paths, campaigns and shards with the
oracle standing in for the device, a planted bug shrunk to a reproducer that `drvtma repro` replays, the reports,
the command line, the target registry and the pytest plugin."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from drvtma.cli.main import main
from drvtma.errors import TensorMapError
from drvtma.fuzz import loads as fuzz_loads
from drvtma.fuzz.campaign import build_case, merge_results, run_campaign
from drvtma.fuzz.choosers import ChooserGenerator, RecordingChooser, case_seed
from drvtma.fuzz.shard import parse_devices, run_sharded
from drvtma.fuzz.shrink import case_strategy, database_key, open_database
from drvtma.fuzz.targets import (
    BUILTIN_TARGETS,
    Outcome,
    Session,
    Target,
    get_target,
    register,
    spec_labels,
    target_names,
)
from drvtma.testing import load_cases
from drvtma.testing.children import child_env
from drvtma.tma.stores import check_case, random_store_case
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.spec import TensorMapSpec

ROOT = Path(__file__).resolve().parents[1]
LOADS = fuzz_loads.LOADS


# ---- choosers: a recorded campaign case is a hypothesis choice sequence

def _choices_to_bytes():
    """hypothesis' choice-sequence encoder; a skip in a hypothesis older than it (the lowest the test extra allows),
    where drvtma's shrinking searches instead of replaying (`compat.hypothesis_choices_to_bytes`)."""
    from drvtma.compat import hypothesis_choices_to_bytes

    encode = hypothesis_choices_to_bytes()
    if encode is None:
        pytest.skip("this hypothesis predates the choice-sequence database (hypothesis.database.choices_to_bytes)")
    return encode


def _replay_in_hypothesis(target, options, trace):
    choices_to_bytes = _choices_to_bytes()
    db, key = InMemoryExampleDatabase(), b"replay"
    db.save(key, choices_to_bytes(trace))
    return find(case_strategy(target, options), lambda case: True,
                settings=settings(database=db, phases=[Phase.reuse], max_examples=1, deadline=None),
                database_key=key)


@pytest.mark.parametrize("name", ["loads", "encode", "stores", "reductions"])
def test_recorded_cases_replay_in_hypothesis_exactly(name):
    target = get_target(name)
    options = target.configure()
    for index in range(12):
        case, trace = build_case(target, options, 11, index)
        replayed = _replay_in_hypothesis(target, options, trace)
        assert target.case_to_json(replayed) == target.case_to_json(case), f"case {index} of {name}"


def test_case_seeds_are_independent_of_the_order_cases_are_built():
    a = [build_case(LOADS, LOADS.configure(), 3, i)[1] for i in (5, 6, 7)]
    b = [build_case(LOADS, LOADS.configure(), 3, i)[1] for i in (7, 5, 6)]
    assert a == [b[1], b[2], b[0]]
    assert build_case(LOADS, LOADS.configure(), 4, 5)[1] != a[0]


def test_chooser_generator_drives_the_store_case_builder():
    for i in range(40):
        case = random_store_case(ChooserGenerator(RecordingChooser(case_seed(2, i))))
        check_case(case)  # valid: the builder's own checks hold on chooser draws


def test_recording_chooser_draws_within_bounds_and_skips_trivial_choices():
    ch = RecordingChooser(case_seed(0, 0))
    values = [ch.integer(-3, 5) for _ in range(500)]
    assert min(values) == -3 and max(values) == 5
    before = len(ch.trace)
    assert ch.integer(7, 7) == 7 and ch.choice(["only"]) == "only"
    assert len(ch.trace) == before
    odds = sum(ch.chance(0.25) for _ in range(4000)) / 4000
    assert 0.2 < odds < 0.3


def test_recording_chooser_words_are_numpys_blocks_read_from_their_ends():
    """The chooser reads the bit generator a chunk at a time, yet its words are still those of
    default_rng(seed).integers(0, 2**63, 4096) per block, each block used from its end: the same seed gives the
    same cases as the whole-block chooser did (across a block's chunks and into the next block)."""
    from drvtma.fuzz import choosers

    seed = case_seed(11, 3)
    rng = np.random.default_rng(seed)
    blocks = [rng.integers(0, 1 << 63, choosers._WORDS, dtype=np.int64) for _ in range(2)]
    want = [int(w) for block in blocks for w in block[::-1]]
    ch = RecordingChooser(seed)
    got = [ch.integer(0, (1 << 63) - 1) for _ in range(choosers._WORDS + 300)]
    assert got == want[:len(got)]


# ---- the oracle's chunk paths agree with the element-by-element ones

@settings(max_examples=300, deadline=None)
@given(load_cases(max_boxes=6, max_dim=40, max_extent_bytes=1 << 20), st.integers(0, 15))
def test_chunked_box_values_match_element_by_element(case, cut):
    spec, coords = case
    rng = np.random.default_rng(len(coords))
    g = rng.integers(0, 256, max(spec.extent_bytes + 16 - cut, spec.extent_bytes), dtype=np.uint8)
    c = oracle.check_load_coordinates(spec, coords)
    assert oracle._rows_are_chunks(spec)
    fast = oracle._box_values_by_chunk(spec, g, c)
    slow = oracle._box_values_by_element(spec, g, c)
    np.testing.assert_array_equal(fast, slow)


def test_chunked_box_values_refuse_short_global_bytes_like_the_element_path():
    spec = TensorMapSpec.create("float32", (8, 12), (4, 8), strides_bytes=(64, 4))
    short = np.zeros(spec.extent_bytes - 4, np.uint8)
    for path in (oracle._box_values_by_chunk, oracle._box_values_by_element):
        with pytest.raises(ValueError, match="global_bytes holds"):
            path(spec, short, oracle.check_load_coordinates(spec, [(4, 4)]))


def test_tf32_rounding_in_32_bits_matches_the_64_bit_formula():
    w = np.random.default_rng(1).integers(0, 1 << 32, 200_000, dtype=np.uint64)
    w[:4] = [0x7F7FFFFF, 0xFF7FFFFF, 0x7F800001, 0xFFFFFFFF]
    dropped = np.uint64(0x1FFF)
    rounded = (w + (dropped >> np.uint64(1)) + ((w >> np.uint64(13)) & np.uint64(1))) & ~dropped
    want = np.where((w & 0x7FFFFFFF) > 0x7F800000, np.uint64(oracle.TF32_CANONICAL_NAN), rounded).astype(np.uint32)
    np.testing.assert_array_equal(oracle.tma_load_convert("tfloat32", w.astype(np.uint32)), want)


# ---- campaigns, shards and the planted bug (the oracle stands in for the device)

def _labels_and_counts(result):
    return result.cases, result.size, result.mismatches, result.by_label, [f.index for f in result.failures]


def test_campaign_counts_by_label_and_is_deterministic():
    options = LOADS.configure(max_boxes=8)
    a = run_campaign(LOADS, options, seed=9, examples=40, fake=True)
    b = run_campaign(LOADS, options, seed=9, examples=40, fake=True)
    assert a.cases == 40 and a.mismatches == 0 and a.size > 40
    assert _labels_and_counts(a) == _labels_and_counts(b)
    assert sum(row[0] for key, row in a.by_label.items() if key.startswith("dtype=")) == 40
    assert {key.split("=")[0] for key in a.by_label} == {"dtype", "rank", "swizzle", "fill"}
    assert set(a.timing) >= {"generate", "oracle", "compare"}


def test_shards_split_the_cases_without_overlap_and_merge_to_one_process():
    options = LOADS.configure(max_boxes=8)
    whole = run_campaign(LOADS, options, seed=4, examples=45, fake=True)
    parts = [run_campaign(LOADS, options, seed=4, examples=45, fake=True, shard=(k, 3)) for k in range(3)]
    assert sorted(b for p in parts for b in p.batches) == whole.batches  # every batch once
    assert _labels_and_counts(merge_results(parts)) == _labels_and_counts(whole)


@pytest.mark.slow
def test_two_shard_processes_on_one_device_give_one_process_result():
    options = LOADS.configure(max_boxes=8)
    whole = run_campaign(LOADS, options, seed=6, examples=32, fake=True)
    merged = run_sharded("loads", options, ["0", "0"], seed=6, examples=32, fake=True, shrink=False)
    assert merged.shards == 2 and merged.devices == ["0", "0"]
    assert _labels_and_counts(merged) == _labels_and_counts(whole)


def test_parse_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert parse_devices("all") == ["2", "3"]
    assert parse_devices("0,0") == ["0", "0"] and parse_devices(None) is None
    with pytest.raises(ValueError):
        parse_devices(",")


def swap_two_bytes(real):
    """The planted bug: the oracle's answer with the box's first two bytes swapped."""
    def buggy(spec, global_bytes, coords, *, box_offset, **kwargs):
        images = real(spec, global_bytes, coords, box_offset=box_offset, **kwargs).copy()
        images[:, [box_offset, box_offset + 1]] = images[:, [box_offset + 1, box_offset]]
        return images
    return buggy


@pytest.fixture
def planted_bug(monkeypatch):
    monkeypatch.setattr(fuzz_loads, "expected_images", swap_two_bytes(fuzz_loads.expected_images))


@pytest.mark.slow
def test_planted_bug_shrinks_to_a_reproducer_that_repro_replays(planted_bug, tmp_path, capsys):
    out, db = tmp_path / "out", tmp_path / "db"
    rc = main(["fuzz", "loads", "--examples", "24", "--seed", "5", "--fake-device", "--quiet", "--out", str(out),
               "--db", str(db), "--max-shrinks", "2"])
    text = capsys.readouterr().out
    assert rc == 1 and "mismatch" in text
    files = sorted(out.glob("repro-loads-*.json"))
    assert files, text
    shrunk = [json.loads(f.read_text()) for f in files if json.loads(f.read_text())["shrunk"]]
    assert len(shrunk) == 2
    repro = shrunk[0]
    case = repro["case"]
    assert len(case["coordinates"]) == 1  # one box
    assert TensorMapSpec.from_dict(case["spec"]).smem_bytes <= 64  # a minimal map: the bug needs two bytes
    assert repro["shrink"]["method"] == "hypothesis: replay and shrink"
    diff = repro["result"]["first_differences"]
    assert [d["offset"] - case["box_offset"] for d in diff] == [0, 1]
    assert diff[0]["expected"] == diff[1]["got"] and diff[0]["got"] == diff[1]["expected"]
    assert repro["campaign"]["seed"] == 5 and repro["options"]["data_seed"] == fuzz_loads.DATA_SEED
    path = next(f for f in files if json.loads(f.read_text())["shrunk"])
    assert main(["repro", str(path), "--fake-device"]) == 1
    assert "same diff as recorded" in capsys.readouterr().out
    # The next campaign (another seed) replays the stored failures first.
    rc = main(["fuzz", "loads", "--examples", "1", "--seed", "77", "--fake-device", "--quiet", "--out",
               str(tmp_path / "again"), "--db", str(db), "--no-shrink"])
    again = json.loads((tmp_path / "again" / "loads-report.json").read_text())
    assert rc == 1 and again["known_failures"] >= 1


def test_a_fixed_bug_replays_as_passing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(fuzz_loads, "expected_images", swap_two_bytes(fuzz_loads.expected_images))
    main(["fuzz", "loads", "--examples", "8", "--seed", "1", "--fake-device", "--quiet", "--out", str(tmp_path),
          "--no-db", "--max-shrinks", "1"])
    path = sorted(tmp_path.glob("repro-loads-*.json"))[0]
    monkeypatch.undo()  # the bug is fixed
    capsys.readouterr()
    assert main(["repro", str(path), "--fake-device"]) == 0
    assert "passes now" in capsys.readouterr().out


def test_replay_drops_stored_examples_that_pass_now(tmp_path):
    db = open_database(tmp_path / "db")
    options = LOADS.configure(max_boxes=4)
    key = database_key(LOADS, options)
    choices_to_bytes = _choices_to_bytes()
    db.save(key, choices_to_bytes(build_case(LOADS, options, 0, 0)[1]))
    result = run_campaign(LOADS, options, seed=0, examples=1, fake=True, database=db)
    assert result.known_failures == 0 and list(db.fetch(key)) == []


# ---- user specs, reports, command line

def test_spec_file_fuzzes_the_users_map(tmp_path, capsys):
    spec = {"dtype": "float16", "shape": [40, 200], "strides_bytes": [416, 2], "box": [16, 64], "swizzle": "128B"}
    (tmp_path / "map.json").write_text(json.dumps(spec))
    rc = main(["fuzz", "loads", "--spec", str(tmp_path / "map.json"), "--examples", "10", "--seed", "2",
               "--fake-device", "--quiet", "--out", str(tmp_path), "--no-db"])
    assert rc == 0
    js = json.loads((tmp_path / "loads-report.json").read_text())
    assert js["options"]["spec"]["shape"] == [40, 200]
    assert [row["value"] for row in js["by"] if row["label"] == "dtype"] == ["float16"]
    with pytest.raises(TensorMapError, match="stride_alignment"):
        LOADS.configure(TensorMapSpec.create("float32", (4, 250), (2, 32), strides_bytes=(1000, 4)))


def test_reports_hold_the_summary_in_markdown_and_json(tmp_path, capsys):
    rc = main(["fuzz", "encode", "--examples", "200", "--seed", "3", "--fake-device", "--quiet", "--out",
               str(tmp_path), "--no-db"])
    out = capsys.readouterr().out
    assert rc == 0 and "drvtma fuzz encode: 200 cases" in out and "what bounds the rate" in out
    js = json.loads((tmp_path / "encode-report.json").read_text())
    assert js["cases"] == 200 and js["mismatches"] == 0 and js["unit"] == "specs"
    assert {row["label"] for row in js["by"]} == {"dtype", "rank", "swizzle", "fill"}
    md = (tmp_path / "encode-report.md").read_text()
    assert "| by " in md and "| all " in md
    ranks = [row["value"] for row in js["by"] if row["label"] == "rank"]
    assert ranks == sorted(ranks, key=lambda v: int(re.match(r"\d+", v).group()))


def test_progress_bar_goes_to_stderr(capsys):
    run_campaign(LOADS, LOADS.configure(max_boxes=2), seed=1, examples=16, fake=True, progress=True)
    err = capsys.readouterr().err
    assert "16 cases" in err and "100.0%" in err


def test_figure_line_for_gpu_check(tmp_path, monkeypatch, capsys):
    jsonl = tmp_path / "figures.jsonl"
    monkeypatch.setenv("DRVTMA_REPORT_JSONL", str(jsonl))
    main(["fuzz", "encode", "--examples", "64", "--seed", "1", "--fake-device", "--quiet", "--out", str(tmp_path),
          "--no-db"])
    figure, coverage = (json.loads(line) for line in jsonl.read_text().splitlines()[-2:])
    assert figure["test"] == "fuzz_campaign" and figure["target"] == "encode"
    assert figure["cases"] == 64 and figure["mismatches"] == 0 and figure["per_second"] > 0
    assert coverage["test"] == "coverage" and coverage["target"] == "encode"
    assert 0 < coverage["hit"] < coverage["classes"] and len(coverage["unhit"]) == coverage["classes"] - coverage["hit"]


def test_fuzz_list_and_unknown_target(capsys):
    assert main(["fuzz", "list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in BUILTIN_TARGETS)
    assert main(["fuzz", "nonesuch", "--fake-device"]) != 0


def test_a_profiled_campaign_names_its_busiest_functions(tmp_path, capsys):
    import json
    import pstats

    path = tmp_path / "p" / "loads.prof"
    assert main(["fuzz", "loads", "--fake-device", "--examples", "16", "--seed", "1", "--no-db", "--quiet",
                 "--out", str(tmp_path), "--profile", str(path)]) == 0
    out = capsys.readouterr().out
    figure = json.loads(next(line for line in out.splitlines() if '"fuzz_profile"' in line))
    top = figure["top"]
    assert figure["target"] == "loads" and len(top) == 12 and top[0]["own_s"] >= top[-1]["own_s"] > 0
    # the whole campaign in the file: the oracle standing in for the GPU, and the builder
    names = {name for _, _, name in pstats.Stats(str(path)).stats}  # type: ignore[attr-defined]
    assert {"load_images", "build", "run_campaign"} <= names and "took the most of their own time" in out
    assert main(["fuzz", "loads", "--fake-device", "--examples", "4", "--devices", "0,0", "--profile",
                 str(path)]) == 2
    assert "--profile: one process's campaign only" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("")
    for where in (tmp_path, tmp_path / "a-file" / "loads.prof"):  # a folder; a file below a file
        assert main(["fuzz", "loads", "--fake-device", "--examples", "4", "--no-db", "--profile", str(where)]) == 2
        err = capsys.readouterr().err
        assert "--profile" in err and len(err.strip().splitlines()) == 1, err


def test_stores_have_no_fake_device():
    with pytest.raises(NotImplementedError):
        get_target("stores").session({}, fake=True)


# ---- the registry is open

class _CountingSession(Session):
    def check_one(self, c):
        return Outcome(c < 990, expected=0, got=c, differences=[{"offset": 0, "expected": "< 990", "got": str(c)}])


class _CountingTarget(Target):
    name = "test-counting"
    unit = "numbers"
    session_class = _CountingSession

    def build(self, ch, options):
        return ch.integer(0, 1000)

    def labels(self, case):
        return {"dtype": "int", "rank": "0"}

    def case_to_json(self, case):
        return {"n": case}

    def case_from_json(self, d, options):
        return d["n"]


def test_a_registered_target_runs_and_shrinks_like_the_built_in_ones():
    target = register(_CountingTarget(), replace=True)
    assert get_target("test-counting") is target and "test-counting" in target_names()
    result = run_campaign(target, target.configure(), seed=1, examples=400)
    assert result.mismatches > 0
    assert result.failures[0].shrunk_case == 990  # hypothesis shrinks to the smallest failing number
    with pytest.raises(KeyError, match="known:"):
        get_target("no-such-target")


def test_a_session_closes_what_it_owns_last_first_and_once():
    closed = []

    class Handle:
        def __init__(self, name):
            self.name = name

        def close(self):
            closed.append(self.name)

    with Session({}) as session:
        session.own(Handle("buffer")), session.own(Handle("probe"))
        with pytest.raises(NotImplementedError):
            session.check([1])
    session.close()
    assert closed == ["probe", "buffer"]
    with pytest.raises(NotImplementedError, match="session_class"):
        Target().session({})


def test_every_target_spells_swizzles_as_specs_do():
    spec = TensorMapSpec.create("float32", (30, 72), (8, 32), swizzle="128B")
    assert spec_labels(spec) == {"dtype": "float32", "rank": "2", "swizzle": "128B", "fill": "zero"}
    assert spec_labels(spec.replace(swizzle="none"))["swizzle"] == "none"
    assert spec_labels(spec.replace(swizzle=7, oob_fill=2)) == {"dtype": "float32", "rank": "2", "swizzle": "7",
                                                                "fill": "2"}  # values no member has: their int
    encode = run_campaign(get_target("encode"), get_target("encode").configure(), seed=3, examples=200, fake=True)
    swizzles = {key.partition("=")[2] for key in encode.by_label if key.startswith("swizzle=")}
    assert {"none", "32B", "64B", "128B"} <= swizzles <= {"none", "32B", "64B", "128B", "4", "5", "6", "7"}


def test_builtin_targets_import_and_describe_themselves():
    for name in BUILTIN_TARGETS:
        target = get_target(name)
        assert target.name == name and target.description and target.unit
        json.dumps(target.configure())


# ---- the pytest plugin

def test_plugin_fixtures_skip_with_the_drivers_message_without_a_gpu(tmp_path):
    import subprocess

    (tmp_path / "test_user.py").write_text(
        "import pytest\n"
        "@pytest.mark.gpu\n"
        "def test_marked():\n    pass\n"
        "def test_ctx(drvtma_ctx):\n    assert drvtma_ctx is not None\n"
        "def test_probe(tma_probe):\n    assert hasattr(tma_probe, 'run')\n"
        "def test_profile():\n"
        "    from hypothesis import settings\n"
        "    assert settings.get_profile('drvtma-ci').deadline is None\n"
        "    assert settings.default.max_examples == 2000\n")
    env = child_env(DRVTMA_HYPOTHESIS_PROFILE="gpu-long")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                           "drvtma.testing.plugin", "-rs", str(tmp_path / "test_user.py")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    out = proc.stdout
    from drvtma.errors import NoGpuError
    from drvtma.runtime.driver import require_capability

    try:
        require_capability()
        has_gpu = True
    except NoGpuError as exc:
        has_gpu, why = False, str(exc)
    if has_gpu:
        assert "4 passed" in out, out
    else:
        assert "1 passed, 3 skipped" in out and why in out, out


def test_the_guide_shows_the_example_tests_line_for_line():
    """docs/testing-your-kernel.md quotes tests/support/user_kernel.py and tests/test_user_kernel_*.py (and the other
    files below): keep them one."""
    guide = (ROOT / "docs" / "testing-your-kernel.md").read_text()
    sources = "\n".join((ROOT / "tests" / name).read_text()
                        for name in ("support/user_kernel.py", "test_user_kernel_cpu.py", "test_user_kernel_gpu.py",
                                     "support/byo_kernels.py", "test_byo_fuzz_cpu.py", "test_byo_cpu.py",
                                     "test_byo_gpu.py", "data/byo/row_copy.cu", "data/byo/nvcc_tile_copy.cu",
                                     "support/byo_image_store.cu", "support/byo_gpu_kernels.py"))
    blocks = re.findall(r"```(cuda|python)\n(.*?)```", guide, flags=re.S)
    assert len(blocks) >= 6
    for _, code in blocks:
        assert code.strip() in sources, code[:200]


def test_user_specs_drive_the_store_and_encode_builders():
    from drvtma.tma.tiled.rules import validate_all

    spec = TensorMapSpec.create("float32", (30, 72), (8, 32), strides_bytes=(320, 4), swizzle="128B")
    for name in ("stores", "reductions"):
        target = get_target(name)
        options = target.configure(spec)
        for i in range(30):
            case, _ = build_case(target, options, 3, i)
            assert case.case.spec == spec and case.case.op in target.ops
            check_case(case.case)  # coordinates, op and shared-memory offset a store can take
    encode = get_target("encode")
    options = encode.configure(spec)
    broken = [len(validate_all(build_case(encode, options, 3, i)[0])) for i in range(60)]
    assert 0 in broken and max(broken) >= 1  # the user's map as is, and with a rule broken


def test_a_shard_that_outlives_its_budget_is_stopped(monkeypatch):
    """run_sharded waits for its shards only as long as their budget allows (shard_timeout), then stops them all
    and says which one was still running."""
    import subprocess

    from drvtma.fuzz import shard

    assert shard.shard_timeout(seconds=60, max_shrinks=5, shrink_seconds=60.0) == 60 + 300 + 300
    assert shard.shard_timeout(examples=1000, shrink=False) == 3600 + 300
    killed = []

    class Stuck:
        returncode = None

        def communicate(self, timeout=None):
            raise subprocess.TimeoutExpired("shard", timeout)

        def kill(self):
            killed.append(self)

    monkeypatch.setattr(shard.subprocess, "Popen", lambda *a, **k: Stuck())
    with pytest.raises(RuntimeError, match=r"shard 0 \(device 0\) still running"):
        shard.run_sharded("loads", {}, ["0", "0"], seconds=1)
    assert len(killed) == 2


def test_draw_chooser_chance_shrinks_towards_false():
    """hypothesis shrinks a draw towards 0: that draw must give False (True only when p = 1), as documented."""
    from hypothesis import find
    from hypothesis import strategies as st

    from drvtma.testing.strategies import DrawChooser

    assert find(st.integers(0, 99), lambda v: True) == 0  # hypothesis' minimal draw, what a shrunk case holds
    assert DrawChooser(lambda strategy: 0).chance(0.3) is False and DrawChooser(lambda s: 0).chance(1.0) is True
    assert DrawChooser(lambda strategy: 99).chance(0.3) is True and DrawChooser(lambda s: 69).chance(0.3) is False
    assert sum(DrawChooser(lambda s, v=v: v).chance(0.3) for v in range(100)) == 30  # the odds stay p


def test_the_oracle_bench_times_every_target_on_the_cpu(tmp_path):
    """scripts/bench_oracle.py: one figure line per target with the oracle's rate, and a usage error for a target
    it does not know."""
    import subprocess

    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_oracle.py"
    run = subprocess.run([sys.executable, str(script), "--cases", "20", "--workers", "1"], capture_output=True,
                         text=True, env=child_env(), timeout=180)
    assert run.returncode == 0, run.stderr
    figures = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    alone = [f for f in figures if f["bench"] == "oracle"]
    pooled = {f["target"]: f for f in figures if f["bench"] == "oracle_workers"}
    assert [f["target"] for f in alone] == ["loads", "im2col", "stores", "reductions"] == list(pooled)
    assert all(f["cases"] == 20 and f["size"] >= 20 and f["oracle_per_second"] > 0 for f in alone)
    # the workers prepared the same cases: the same boxes, loads or cases
    assert all(pooled[f["target"]]["size"] == f["size"] and 0 < pooled[f["target"]]["busy"] <= 1 for f in alone)
    bad = subprocess.run([sys.executable, str(script), "--targets", "encode"], capture_output=True, text=True,
                         env=child_env(), timeout=60)
    assert bad.returncode == 2 and "--targets" in bad.stderr and "Traceback" not in bad.stderr


def test_the_recording_chooser_draws_the_words_of_its_blocks_in_the_same_order_however_it_converts_them():
    """Words come from blocks of 4,096 (a NumPy Generator's integers), each used from its end; converting a block a
    chunk at a time changes nothing a campaign draws, across block ends too."""
    from drvtma.fuzz import choosers

    ch = choosers.RecordingChooser([7, 3])
    got = [ch.integer(0, (1 << 62) - 1) for _ in range(3 * choosers._WORDS + 5)]
    rng = np.random.default_rng([7, 3])
    want = []
    while len(want) < len(got):
        want += rng.integers(0, 1 << 63, choosers._WORDS, dtype=np.int64).tolist()[::-1]
    assert got == [w % (1 << 62) for w in want[:len(got)]] and ch.trace == got
