"""One table writer: every table drvtma prints or writes goes through runtime.figures.table_text (tabulate), and
reports through figures.write_report. The tables that used to be written beside it print the same text."""

from __future__ import annotations

import ast
from pathlib import Path

from tabulate import tabulate

from drvtma.runtime import capabilities as caps
from drvtma.runtime.figures import table_text

PACKAGE = Path(__file__).resolve().parents[1] / "drvtma"


def test_only_the_table_writer_imports_tabulate():
    users = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "tabulate" for n in names):
                users.append(str(path.relative_to(PACKAGE)))
    assert users == ["runtime/figures.py"]


def test_the_multicast_bench_table_is_the_text_it_was():
    from drvtma.cluster.bench import BenchPoint, BenchResult

    points = [BenchPoint(k, t, mode, ms, 1 << 20, 1 << 19) for k, t in ((2, 16384), (4, 32768))
              for mode, ms in (("own", 0.0123), ("multicast", 0.0101))]
    result = BenchResult(points, 264, 128 << 20, 4)
    before = tabulate(result.rows(), headers=result.HEADERS, tablefmt="github")  # what text() printed itself
    assert result.text().startswith(before + "\n\n")


def test_the_descriptor_bench_tables_are_the_text_they_were():
    from drvtma.tma.maps.descriptor_bench import DescriptorBench

    bench = DescriptorBench([("by-value", 1.234, 5.678, 0.296, 0.0), ("global", 1.5, 6.0, 0.3, 0.266)],
                            [("reuse one map", 3.14159), ("encode each launch", 9.87654)], 16, 132)
    dev = tabulate(bench.device_rows, headers=["map", "1 load/CTA (us)", "16 loads/CTA (us)", "per extra load (us)",
                                               "first load vs by-value (us)"], floatfmt=".2f")
    host = tabulate(bench.host_rows, headers=["launch loop (host + device)", "us per launch"], floatfmt=".2f")
    assert bench.text() == f"device time, 132 CTAs, one 2-D box of 8 KiB per load\n{dev}\n\n{host}"


def _cells(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in markdown.splitlines()
            if not set(line) <= set("|-: ")]


def test_the_capability_table_holds_the_cells_it_held():
    """The Markdown table now comes from table_text (padded columns): the same cells, row by row, as the
    hand-joined table it replaced."""
    rows = _cells(caps.markdown())
    assert rows[0][:4] == ["compute capability", "GPUs", "target", "tma"] and rows[0][-1] == "cluster max"
    assert [r[0] for r in rows[1:]] == [a.sm for a in caps.ARCHS.values()]
    assert caps.markdown() == table_text(rows[0], rows[1:]) + "\n"


def test_the_sweep_writes_its_report_through_the_one_writer(tmp_path, monkeypatch):
    from test_sweep_cpu import synthetic_result

    from drvtma.b08 import sweep

    monkeypatch.setattr(sweep, "plot_png", lambda result, path: False)
    written = []
    real = sweep.figures.write_report
    monkeypatch.setattr(sweep.figures, "write_report", lambda *a, **k: written.append(a[1]) or real(*a, **k))
    result = synthetic_result()
    paths = sweep.write_outputs(result, tmp_path / "out", stem="s")
    assert written == ["s"] and [p.name for p in paths] == ["s.csv", "s.md"]
    assert paths[0].read_text() == sweep.csv_text(result) and paths[1].read_text() == sweep.markdown_text(result)
