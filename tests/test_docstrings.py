"""The package's docstrings and comments give reasons, not results: no bench file names, no measured figures.

Figures go stale with the next run and belong to bench/results/ (rendered into BENCHMARKS.md, which a docstring may
link to: BENCHMARKS.md#key); a docstring says why the code is as it is. Reads the sources only.
"""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "spacy_cner"
SOURCES = sorted(PACKAGE.rglob("*.py"))

# A bench script, result or notebook by its path; a measured figure: a decimal beside F1, "points", a speed, a ratio.
BENCH_FILE = re.compile(r"\bbench/|\bbench_\w+\.py\b|\bresults/\w")
FIGURE = re.compile(
    r"\b\d+\.\d+\s*(?:F1|points?)\b"
    r"|\bF1\b[^.;\n]{0,20}?\b\d{2}\.\d"
    r"|\b\d[\d,.]*\s*(?:chars/s|docs/s)"
    r"|\b\d+(?:\.\d+)?\s*(?:x|times|%)\s+(?:faster|slower|spaCy|the teacher|its teacher)"
)


def prose(path: Path):
    """(line, text) of each docstring and comment of a module."""
    source = path.read_text(encoding="utf8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    yield body[0].lineno, body[0].value.value
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def offences(path: Path):
    return [
        f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}"
        for line, text in prose(path)
        for pattern in (BENCH_FILE, FIGURE)
        for match in pattern.finditer(text)
    ]


@pytest.mark.parametrize("path", SOURCES, ids=[p.relative_to(PACKAGE).as_posix() for p in SOURCES])
def test_no_bench_file_nor_figure_in_docstrings_and_comments(path):
    assert not offences(path), "give the reason, link BENCHMARKS.md#key for the figures: " + "; ".join(offences(path))


def test_the_guard_catches_a_bench_path_and_a_figure(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '"""Faster (bench/bench_speed.py): 3.1x spaCy\'s ner, test F1 95.30."""\n# 12,000 chars/s\nX = 1\n',
        encoding="utf8",
    )
    found = [text for _, text in prose(module)]
    assert len(found) == 2
    hits = [m.group(0) for text in found for pattern in (BENCH_FILE, FIGURE) for m in pattern.finditer(text)]
    assert hits == ["bench/", "bench_speed.py", "3.1x spaCy", "F1 95.3", "12,000 chars/s"]
