"""The docs read on their own: no project-internal references (issue numbers, notes outside the repository), each
article introduced by its title where a document first names it, and every module path and repository path they
give exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Hand-written docs; gpu-check*.md are run reports (step output quoted as it came), the subfolders bench output.
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted(p for p in (ROOT / "docs" / "results").glob("*.md") if not p.name.startswith("gpu-check"))]
SOURCES = [p for pattern in ("drvtma/**/*.py", "scripts/*", "tests/*.py", "cu/**/*.cu", "cu/**/*.cuh")
           for p in sorted(ROOT.glob(pattern)) if p.is_file() and p.name != Path(__file__).name]  # not its patterns

INTERNAL = [re.compile(p, re.I) for p in (r"\bissue \d+(?![.%\d])", r"\bissue's\b", r"\.\./shared\b", r"\bshared/(docs|seeds)\b",
                                         r"\bsecond seed\b", r"\bthe seed's\b", r"\bseed's claims\b")]
# How a document may name an article, and pieces of the titles one of which must come with its first mention.
B08_TITLE, TC_TITLE = "吞吐墙", "从Hopper到Blackwell"
ARTICLES = {"B-08": (re.compile(r"\bB-08\b"), (B08_TITLE,)),
            "the async tensor-core article": (re.compile(r"tensor-core article"), (TC_TITLE,)),
            "an article": (re.compile(r"(?<![-\w])[Tt]he article(?![-\w])"), (B08_TITLE, TC_TITLE))}
MODULE_PATH = re.compile(r"(?<![\w/.-])drvtma(?:\.[A-Za-z_]\w*)+")
REPO_PATH = re.compile(r"(?<![\w/.<-])((?:drvtma|cu|scripts|tests|docs)/[\w./-]*)")


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_no_project_internal_references(doc):
    text = doc.read_text()
    found = [f"{m.group(0)!r} in {line.strip()[:100]!r}" for line in text.splitlines() for r in INTERNAL
             for m in r.finditer(line)]
    assert not found, f"{_rel(doc)}: say what is meant instead: " + "; ".join(found)


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_each_article_is_introduced_where_first_named(doc):
    text = doc.read_text()
    for name, (mention, titles) in ARTICLES.items():
        m = mention.search(text)
        if m is None:
            continue
        end = text.find("\n\n", m.end())
        if text[text.rfind("\n", 0, m.start()) + 1:].startswith("#"):  # named in a heading: the next paragraph
            end = text.find("\n\n", end + 2)
        upto = text[:end if end >= 0 else len(text)]
        assert any(t in upto for t in titles), (
            f"{_rel(doc)} names {name} ({m.group(0)!r}) before saying what it is: give its title (with "
            f"{' or '.join(map(repr, titles))}) in that paragraph or before")


def _resolves(dotted: str, literals: str) -> bool:
    """A module, or an attribute of one; or a name the package itself quotes (an entry-point group)."""
    if f'"{dotted}"' in literals:
        return True
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_dotted_module_path_in_the_docs_exists():
    literals = "\n".join(p.read_text() for p in ROOT.glob("drvtma/**/*.py"))
    missing = [f"{_rel(doc)}:{n}: {m.group(0)}" for doc in DOCS
               for n, line in enumerate(doc.read_text().splitlines(), 1)
               for m in MODULE_PATH.finditer(line) if not _resolves(m.group(0), literals)]
    assert not missing, "no such module or attribute:\n" + "\n".join(missing)


def test_every_repository_path_in_the_docs_exists():
    missing = [f"{_rel(doc)}:{n}: {m.group(1)}" for doc in DOCS
               for n, line in enumerate(doc.read_text().splitlines(), 1)
               for m in REPO_PATH.finditer(line) if not (ROOT / m.group(1).rstrip(".")).exists()]
    assert not missing, "no such file or folder:\n" + "\n".join(missing)


def test_code_comments_and_help_give_reasons_not_issue_numbers():
    pattern = re.compile(r"\bissue \d+|\bissue's\b|\bsecond seed\b|\bshared/(docs|seeds)\b", re.I)
    found = [f"{_rel(p)}:{n}: {line.strip()[:100]}" for p in SOURCES
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if pattern.search(line)]
    assert not found, "say why instead of naming an issue:\n" + "\n".join(found)


def test_the_readme_lists_the_environment_variables_as_settings_documents_them():
    """README's Environment section is drvtma.settings.markdown(): every variable, its default and meaning."""
    from drvtma import settings

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Environment\n\n", 1)[1].split("\n## ", 1)[0]
    assert section.rstrip("\n") == settings.markdown().rstrip("\n"), "regenerate it from settings.markdown()"


def test_the_public_entry_points_document_parameters_returns_and_raises():
    """The entry points users call first carry numpy-style sections, one style for all."""
    from drvtma.fuzz.campaign import run_campaign
    from drvtma.fuzz.user import fuzz_kernel
    from drvtma.gemm.conv import Conv2d
    from drvtma.gemm.launch import Gemm
    from drvtma.runtime.module import Kernel, load_module
    from drvtma.tma.im2col.encode import encode_im2col
    from drvtma.tma.tiled.encode import encode_tiled
    from drvtma.tma.tiled.probe import check_loads

    for obj in (encode_tiled, encode_im2col, load_module, Kernel.launch, check_loads, run_campaign, fuzz_kernel,
                Conv2d, Gemm):
        doc = obj.__doc__ or ""
        sections = ["Parameters\n", "Raises\n"] + ([] if isinstance(obj, type) or obj is Kernel.launch
                                                   else ["Returns\n"])
        missing = [s.strip() for s in sections if s not in doc.replace("    ", "").replace("--", "")]
        assert not missing, f"{obj.__qualname__}: no {missing} section"


def test_printed_figures_state_measurements_not_internal_targets():
    """Bench and sweep output says what was measured; a "(target ...)" or "misses the ... target" beside a figure
    reads as a failure of the user's GPU, where it is only a project goal."""
    pattern = re.compile(r"\(target [<>]=|misses the .{0,20}target", re.I)
    found = [f"{_rel(p)}:{n}: {line.strip()[:100]}" for p in SOURCES
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if pattern.search(line)]
    assert not found, "print the measurement only:\n" + "\n".join(found)
