"""Figure lines: one JSON object per measured or checked figure, printed and appended to $DRVTMA_REPORT_JSONL
(scripts/gpu-check sets it and lists every line in its report). Tests, benchmarks and commands all record here."""

from __future__ import annotations

import json
import os

from .. import settings


def record_figure(figure: dict, *, echo: bool = True) -> str:
    """Record one figure (a JSON-ready dict); returns its line. `echo` also prints it."""
    line = json.dumps(figure, sort_keys=True)
    if echo:
        print(line)
    path = settings.REPORT_JSONL.get()
    if path:
        append_line(path, line)
    return line


def append_line(path, line: str) -> None:
    """One os.write on an O_APPEND file: lines from concurrent processes (pytest-xdist workers) never interleave."""
    data = (line + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while data:  # a regular file takes it whole; a short write (full disk, a signal) sends the rest after
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def csv_text(header, rows) -> str:
    """A benchmark's CSV: `header` then `rows` through the csv module (quoted where a value needs it), "\n" ends."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def table_text(header, rows, fmt: str = "github", *, numparse: bool = False, floatfmt: str = "g") -> str:
    """A table through tabulate: every report's and command's tables are written here. "github" is a Markdown table,
    "simple" plain text. Cells are shown as given unless `numparse` (then numbers, also numeric text, align right
    and floats take `floatfmt`)."""
    from tabulate import tabulate

    return tabulate(rows, headers=header, tablefmt=fmt, disable_numparse=not numparse, floatfmt=floatfmt)


def write_report(out_dir, stem: str, csv: str, *, title: str = "", text: str = "", markdown: str | None = None):
    """A benchmark's `stem`.csv and `stem`.md under out_dir (created): the Markdown is given, or `text` fenced under
    `# title`. Returns the two paths. Build the CSV with `csv_text` and Markdown tables with `table_text`."""
    from pathlib import Path

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = out / f"{stem}.csv", out / f"{stem}.md"
    paths[0].write_text(csv)
    paths[1].write_text(markdown if markdown is not None else f"# {title}\n\n```\n{text}\n```\n")
    return paths


def record_test(test: str, **fields) -> str:
    """A test's figure: ``{"test": test, **fields}``."""
    return record_figure({"test": test, **fields})
