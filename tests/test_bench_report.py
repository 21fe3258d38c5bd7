"""BENCHMARKS.md, bench/DETAILS.md and the README's results table are what bench/report.py renders from
bench/results/*.json.

A hand edit of either fails here: edit a result (or rerun its bench script), then `python bench/report.py`.
No data, no models: the committed result files only.
"""

import datetime
import importlib.util
import json
import re
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def _module(name: str):
    """A bench script as a module (bench/ is not a package; its scripts import each other by name)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _module("report")
common = _module("_common")
RESULT_FILES = sorted((BENCH / "results").glob("*.json"))


PAGES = (ROOT / "BENCHMARKS.md", BENCH / "DETAILS.md")


def test_benchmarks_md_is_rendered_from_the_results():
    records = report.load_records()
    assert (ROOT / "BENCHMARKS.md").read_text(encoding="utf8") == report.render_benchmarks(records), (
        "BENCHMARKS.md differs from bench/results/*.json: run `python bench/report.py`"
    )
    assert (BENCH / "DETAILS.md").read_text(encoding="utf8") == report.render_details(records), (
        "bench/DETAILS.md differs from bench/results/*.json: run `python bench/report.py`"
    )


def test_benchmarks_md_answers_each_question_in_a_screenful():
    """BENCHMARKS.md shows each question's headline tables only (the rest: one line each, and bench/DETAILS.md)."""
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf8")
    assert text.count("\n") <= 500, "BENCHMARKS.md over 500 lines: fewer headline results in bench/questions.toml"
    for table in re.findall(r"(?:^\|.*\n)+", text, flags=re.M):
        assert table.count("\n") - 2 <= 40, f"a table of {table.count(chr(10)) - 2} rows: {table[:80]}"
    assert "python bench/" not in text.replace("`python bench/report.py`", ""), "a command line: bench/DETAILS.md's"


def test_every_result_has_its_section_in_details_md():
    text = (BENCH / "DETAILS.md").read_text(encoding="utf8")
    records = report.load_records()
    for name, record in records.items():
        assert text.count(f'<a id="result-{name}"></a>') == 1, name
        section = text[text.index(f'<a id="result-{name}"></a>') :]
        assert report.source_line(record) in section[: section.find('<a id="result-', 1)], name


def test_links_of_the_two_pages_resolve():
    """Every relative link of BENCHMARKS.md and bench/DETAILS.md names a file, and an anchor one the page has."""
    anchors = {page: set(re.findall(r'<a id="([^"]+)"></a>', page.read_text(encoding="utf8"))) for page in PAGES}
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf8")):
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (anchor and linked in anchors and anchor not in anchors[linked]):
                broken.append(f"{page.name}: {target}")
    assert not broken, broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_table_cell_is_over_the_cap_and_every_footnote_is_said(page):
    text = page.read_text(encoding="utf8")
    cells = [
        cell.strip() for line in text.splitlines() if line.startswith("|") for cell in line.strip("|").split(" | ")
    ]
    longest = max(cells, key=len)
    assert len(longest) <= report.MAX_CELL, f"a cell of {len(longest)} characters: {longest[:80]}..."
    marks = set(re.findall(r"\[\^(\d+)\](?!:)", text))
    assert marks == set(re.findall(r"^\[\^(\d+)\]:", text, flags=re.M))


def test_a_long_cell_keeps_its_first_words_and_its_text_goes_to_a_footnote():
    notes = report.Footnotes()
    settings = "spacy-cner default.cfg (its layers) + " + ",".join(f"training.key{i}={i}" for i in range(20))
    columns, _, rows = notes.capped((["system", "F1"], ["left", "right"], [[settings, "90.00"], [settings, "91.00"]]))
    assert rows[0][0] == rows[1][0] and rows[0][1] == "90.00" and rows[0][0].endswith(",…[^1]")
    assert rows[0][0].startswith("spacy-cner default.cfg + training.key0=0,") and len(rows[0][0]) <= report.MAX_CELL
    assert notes.flush() == [f"[^1]: {settings}", ""] and notes.flush() == []
    assert notes.mark("short") == "short"
    assert notes.mark("x (" + "y " * 70 + ")") == "x[^2]"


def test_links_into_benchmarks_md_name_a_questions_anchor():
    """Docstrings point at a question's section (BENCHMARKS.md#key, its key in bench/questions.toml)."""
    anchors = set(
        re.findall(r'^### <a id="([\w-]+)"></a>', (ROOT / "BENCHMARKS.md").read_text(encoding="utf8"), flags=re.M)
    )
    assert {question.key for question in report.QUESTIONS} == anchors
    for path in (ROOT / "spacy_cner").rglob("*.py"):
        for key in re.findall(r"BENCHMARKS\.md#([\w-]+)", path.read_text(encoding="utf8")):
            assert key in anchors, f"{path.relative_to(ROOT)}: no section BENCHMARKS.md#{key}"


def test_readme_table_is_rendered_from_the_results():
    readme = (ROOT / "README.md").read_text(encoding="utf8")
    assert readme.count(report.README_MARKERS[0]) == 1 and readme.count(report.README_MARKERS[1]) == 1
    assert report.updated_readme(readme, report.load_records()) == readme, (
        "README.md's results table differs from bench/results/*.json: run `python bench/report.py`"
    )


def test_the_targets_come_first():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Where each target stands"
    assert text.index("## Where each target stands") < 1500  # on the first screen


@pytest.mark.parametrize("path", RESULT_FILES, ids=[p.stem for p in RESULT_FILES])
def test_every_result_says_where_it_comes_from(path):
    record = json.loads(path.read_text(encoding="utf8"))
    assert record["name"] == path.stem
    assert record["command"].strip()
    datetime.date.fromisoformat(record["date"][:10])
    assert record["machine"]["line"].strip()
    assert "commit" in record["code_version"] and "dirty" in record["code_version"]
    assert record["figures"] and (record.get("table_rows") or record.get("tables"))
    if record.get("code_version", {}).get("commit") is None:
        assert record.get("transcribed_from"), "a result without a commit must say where it was transcribed from"


def _anchors(markdown: str) -> set:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    anchors, seen = set(), {}
    for match in re.finditer(r"^#{1,6} (.+)$", markdown, flags=re.M):
        text = match.group(1).strip().lower()
        slug = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LMN").replace(" ", "-")
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_transcribed_results_point_at_a_history_section():
    anchors = _anchors((BENCH / "HISTORY.md").read_text(encoding="utf8"))
    for path in RESULT_FILES:
        source = json.loads(path.read_text(encoding="utf8")).get("transcribed_from", "")
        if source.startswith("bench/HISTORY.md#"):
            assert source.split("#", 1)[1] in anchors, f"{path.name}: no section {source}"


def test_save_result_records_the_run_and_report_shows_it(tmp_path, monkeypatch):
    """A result holds data: figures and its tables' rows, no Markdown; the report renders the rows."""
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(sys, "argv", [str(BENCH / "bench_example.py"), "--repeats", "2"])
    section = common.Section("An example", "One thread.", [[{"system": "ours", "chars/s": 1234}]])
    path = common.save_result("example", {"chars_per_s": 1234.5, "model": tmp_path}, section, notes="Ours is fast.")
    record = json.loads(path.read_text(encoding="utf8"))
    assert record["command"] == "python bench/bench_example.py --repeats 2"
    assert record["title"] == "An example"
    assert record["machine"]["cores"] >= 1 and record["machine"]["line"]
    assert set(record["code_version"]) == {"commit", "dirty"}
    assert record["figures"] == {"chars_per_s": 1234.5, "model": str(tmp_path)}
    assert record["table_rows"] == [[{"system": "ours", "chars/s": 1234}]] and "tables" not in record
    assert record["notes"] == "One thread. Ours is fast."
    assert common.save_result("-", {}, section) is None
    # A result no question names yet is one line after the questions, its tables and source in bench/DETAILS.md.
    records = {**report.load_records(), "example": record}
    other = report.render_benchmarks(records).split("## Other results")[1]
    assert "- [`example`](bench/DETAILS.md#result-example) · An example · " in other
    other = report.render_details(records).split("## Other results")[1]
    assert "| ours | 1,234 |" in other and "| --- | ---: |" in other
    assert "python bench/bench_example.py --repeats 2" in other
    assert "| ours | 1,234 |" in section.markdown()  # what the script prints is what the report writes


def test_save_result_takes_no_markdown(tmp_path, monkeypatch):
    """The Markdown a script used to pass is refused (rows only), and so is a cell no table can show."""
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    with pytest.raises(TypeError, match="not Markdown"):
        common.save_result("example", {}, "| system | chars/s |\n| --- | ---: |\n| ours | 1,234 |")
    with pytest.raises(ValueError, match="holds a dict"):
        common.save_result("example", {}, common.Section("x", "", [[{"system": "ours", "f": {"p": 1.0}}]]))
    assert not list(tmp_path.iterdir())


def test_rows_render_as_a_table_in_their_order():
    """Columns in the rows' key order (later keys after), "X sd" into X's cell, a float column at its most
    decimals, thousands with commas, lists joined by " / " where the column says so, empty for None."""
    rows = [
        {
            "system": "ours",
            "F1": 93.4,
            "F1 sd": 0.5,
            "chars/s": 12345,
            "P / R": [90.1, 88.25],
            "seeds": [0, 1],
            "alone": True,
        },
        {
            "system": "spaCy",
            "F1": 91.25,
            "chars/s": None,
            "P / R": [89.0, 87.5],
            "seeds": [2],
            "alone": False,
            "note": "late",
        },
    ]
    columns, align, cells = common.rows_table(rows)
    assert columns == ["system", "F1", "chars/s", "P / R", "seeds", "alone", "note"]
    assert align == ["left", "right", "right", "right", "right", "right", "left"]
    assert cells[0] == ["ours", "93.40 ± 0.50", "12,345", "90.10 / 88.25", "0, 1", "yes", ""]
    assert cells[1] == ["spaCy", "91.25", "", "89.00 / 87.50", "2", "no", "late"]
    assert common.rows_table([{"x": 1234.5}, {"x": 3e-05}])[2] == [["1,234.5"], ["3e-05"]]
    # The report reads such a result's rows; a legacy result (cells of the printed Markdown) as it was saved.
    assert report.record_tables({"table_rows": [rows, []]}) == [(columns, align, cells)]
    legacy = {"tables": [{"columns": ["a"], "align": ["right"], "rows": [["**1**"]]}]}
    assert report.record_tables(legacy) == [(["a"], ["right"], [["**1**"]])]


@pytest.mark.parametrize("script", ["bench_load", "bench_precision"])
def test_scripts_rows_hold_the_numbers_their_legacy_tables_showed(script):
    """bench_load's and bench_precision's rows, rendered from a committed result's figures, give the numbers of
    the cells that result saved when scripts saved Markdown (the units now in the column names)."""
    import argparse

    name = {"bench_load": "load", "bench_precision": "precision_models"}[script]
    record = json.loads((BENCH / "results" / f"{name}.json").read_text(encoding="utf8"))
    figures = record["figures"]
    if script == "bench_load":
        section = _module(script).render(figures["rows"], figures["repeats"])
    else:
        repeats = int(re.search(r"best of (\d+)", record["notes"]).group(1))
        section = _module(script).render(figures["rows"], argparse.Namespace(repeats=repeats))
        assert section.notes in record["notes"]
    _, _, cells = common.rows_table(section.tables[0])
    numbers = lambda text: re.findall(r"[-+]?\d[\d,]*\.?\d*", text.replace("+", ""))  # noqa: E731
    assert [[numbers(cell) for cell in row] for row in cells] == [
        [numbers(cell) for cell in row] for row in record["tables"][0]["rows"]
    ]


def test_the_active_learning_target_reads_bench_selects_figures():
    """bench_select.py's result ({dataset: {strategy: {seed: {labels: {"f": F1}}}}}) fills issue 37's first target."""

    def curve(f):
        return {str(seed): {str(n): {"f": f(n)} for n in range(200, 2001, 200)} for seed in range(3)}

    curves = {
        dataset: {"random": curve(lambda n: n / 2500), "entropy": curve(lambda n: min(0.8, n / 1250))}
        for dataset in ("resume", "youku", "msra")
    }
    measured, status = report.labels_saved({"select": {"figures": {"curves": curves, "stop": 2000}}})
    assert status == "met" and "resume 1,000 (3 seeds; random's 80.00)" in measured
    assert measured.endswith("(3 seeds): entropy")
    # Each dataset reached by another strategy: not one strategy for every dataset, so not met.
    mixed = {dataset: dict(strategies) for dataset, strategies in curves.items()}
    mixed["msra"] = {"random": curves["msra"]["random"], "expected-count": curves["msra"]["entropy"]}
    measured, status = report.labels_saved({"select": {"figures": {"curves": mixed, "stop": 2000}}})
    assert status == "not met" and "msra 1,000 (3 seeds; random's 80.00)" in measured
    assert measured.endswith(": none")
    # Met by a warm-started strategy only: said, since random retrains from scratch at each size.
    warm = {
        dataset: {"random": strategies["random"], "entropy (warm)": strategies["entropy"]}
        for dataset, strategies in curves.items()
    }
    measured, status = report.labels_saved({"select": {"figures": {"curves": warm, "stop": 2000}}})
    assert status.startswith("met, by a warm-started strategy") and measured.endswith(": entropy (warm)")
    # With a warm-started random curve (3 seeds) on every dataset, the target is the better random curve.
    for strategies in warm.values():
        strategies["random (warm)"] = curve(lambda n: n / 2400)  # 0.833 at 2,000: entropy (warm) caps at 0.8
    measured, status = report.labels_saved({"select": {"figures": {"curves": warm, "stop": 2000}}})
    assert status == "not met" and "resume not reached (3 seeds; random's 83.33)" in measured
    assert measured.endswith(": none")
    later = {
        dataset: {**strategies, "entropy (warm)": curve(lambda n: n / 1700)} for dataset, strategies in warm.items()
    }
    measured, status = report.labels_saved({"select": {"figures": {"curves": later, "stop": 2000}}})
    assert status == "not met" and "resume 1,600 (3 seeds; random's 83.33)" in measured
    assert measured.endswith(": none (closest: entropy (warm), on every dataset with at most 80% of random's labels)")
    for strategies in warm.values():
        strategies["random (warm)"] = curve(lambda n: n / 2600)  # below random from scratch: random sets it
    measured, status = report.labels_saved({"select": {"figures": {"curves": warm, "stop": 2000}}})
    assert status == "met" and "resume 1,000 (3 seeds; random's 80.00)" in measured
    assert measured.endswith(": entropy (warm)")
    _, _, rows = report.select_table({"select": {"figures": {"curves": warm, "stop": 2000}}})
    assert [row[1] for row in rows[:3]] == ["random", "entropy (warm)", "random (warm)"]
    assert [row[-1] for row in rows[:3]] == ["2,000", "1,000", "no"]
    # The curve that sets the target reaches it at --stop, whatever the rounding of its scaled mean.
    odd = {"resume": {"random": {str(s): {"2000": {"f": f}} for s, f in enumerate((0.7611, 0.7913, 0.7967))}}}
    assert report.select_table({"select": {"figures": {"curves": odd, "stop": 2000}}})[2][0][-1] == "2,000"
    warm["msra"]["random (warm)"] = {"0": warm["msra"]["random (warm)"]["0"]}  # one seed: the caveat again
    assert report.labels_saved({"select": {"figures": {"curves": warm, "stop": 2000}}})[1].startswith("met, by a warm")
    columns, _, rows = report.select_table({"select": {"figures": {"curves": curves, "stop": 2000}}})
    assert columns[:4] == ["dataset", "strategy", "seeds", "200"] and len(rows) == 6
    assert rows[1][:3] == ["resume", "entropy", "3"] and rows[1][-1] == "1,000" and rows[0][-1] == "2,000"
    # Two results (e.g. MSRA and the small sets run apart) are read together.
    split = {
        "select_a": {"figures": {"curves": {"msra": curves["msra"]}, "stop": 2000}},
        "select_b": {"figures": {"curves": {k: curves[k] for k in ("resume", "youku")}, "stop": 2000}},
    }
    assert report.labels_saved(split)[1] == "met"
    curves["msra"]["entropy"] = curve(lambda n: n / 2600)
    assert report.labels_saved({"select": {"figures": {"curves": curves, "stop": 2000}}})[1] == "not met"

    # Finals (the labelled sentences trained to the stopping rule) decide once they cover three datasets.
    def final(f, sizes):
        return {str(seed): {str(n): {"f": f(n)} for n in sizes} for seed in range(3)}

    finals = {
        dataset: {
            "random": final(lambda n: n / 2500, (1200, 2000)),
            "entropy (warm)": final(lambda n: n / 1400, (800, 1200)),
        }
        for dataset in ("resume", "youku")
    }
    both = {
        "select": {"figures": {"curves": mixed, "stop": 2000}},
        "select_final": {"figures": {"finals": finals, "stop": 2000}},
    }
    measured, status = report.labels_saved(both)
    assert status == "not met (trained to the stopping rule: 2 of 3 datasets)"
    assert "trained from scratch to default.cfg's stopping rule: fewest labels" in measured
    assert "resume 1,200 (3 seeds; random's 80.00)" in measured.split("stopping rule:")[1]
    finals["msra"] = {
        "random": final(lambda n: n / 2500, (2000,)),
        "entropy (warm)": final(lambda n: n / 1400, (1200,)),
    }
    measured, status = report.labels_saved(both)
    assert status == "met" and measured.endswith("(3 seeds): entropy (warm)")  # no warm caveat: finals train alike
    finals["msra"]["entropy (warm)"] = final(lambda n: n / 1600, (1200,))  # 75.0 < 80.0
    assert report.labels_saved(both)[1] == "not met"
    _, _, rows = report.select_table(both, ("finals",))
    assert [row[:2] + row[-1:] for row in rows[:2]] == [
        ["resume", "random", "2,000"],
        ["resume", "entropy (warm)", "1,200"],
    ]
    columns, _, rows = report.select_table(both, ("curves", "finals"))  # the rounds' rows, then the finals'
    assert len(rows) == 6 + 6 and rows[6][1] == "random" + report.FINALS and rows[7][-1] == "1,200"
    # The finals of another variant, in a result of their own: one entry per dataset, the curves merged.
    power = {
        dataset: {"random": finals[dataset]["random"], "entropy (warm, power 1)": final(lambda n: n / 1300, (1200,))}
        for dataset in ("resume", "youku", "msra")
    }
    three = {**both, "select_power_final": {"figures": {"finals": power, "stop": 2000}}}
    assert [(d, sorted(c)) for d, _, c in report.select_curves(three, "finals")] == [
        (d, ["entropy (warm)", "entropy (warm, power 1)", "random"]) for d in ("resume", "youku", "msra")
    ]
    measured, status = report.labels_saved(three)
    assert status == "met" and measured.endswith("(3 seeds): entropy (warm, power 1)")
    assert measured.count("resume 1,200") == 1
    # Finals of more seeds (report.MORE_SEEDS) are set beside the target's, their seeds added, not in its table.
    more = {
        "youku": {
            "random": {"3": {"2000": {"f": 0.70}}},
            "entropy (warm, power 1)": {"3": {"1200": {"f": 0.85}}, "4": {"1200": {"f": 0.87}}},
        }
    }
    measured, status = report.labels_saved({**three, report.MORE_SEEDS: {"figures": {"finals": more, "stop": 2000}}})
    assert (measured, status) == (
        report.labels_saved(three)[0]
        + (
            f". With more seeds ({report.MORE_SEEDS}): youku, entropy (warm, power 1), 5 seeds: "
            f"{(3 * 1200 / 1300 + 1.72) / 5 * 100:.2f} at 1,200 against random's "
            f"{(3 * 0.8 + 0.7) / 4 * 100:.2f} at 2,000 (4 seeds)"
        ),
        "met",
    )
    power["youku"]["random"] = final(lambda n: n / 2500, (1000,))  # stops elsewhere: not one table
    three["select_power_final"]["figures"]["stop"] = 1000
    with pytest.raises(ValueError, match="not one table"):
        report.select_curves(three, "finals")
    assert columns[3:-1] == [f"{n:,}" for n in range(200, 2001, 200)]
    for seeds in curves["resume"].values():  # fewer than 3 seeds: not met, and said
        seeds.pop("2")
    measured, status = report.labels_saved(split)
    assert status == "not met" and "resume 1,000 (2 seeds; " in measured
    # A strategy run on fewer seeds beside it does not count against the one that reaches random's F1.
    one_seed = {"youku": {**curves["youku"], "mean-entropy": {"0": curves["youku"]["entropy"]["0"]}}}
    measured, _ = report.labels_saved({"select": {"figures": {"curves": one_seed, "stop": 2000}}})
    assert "youku 1,000 (3 seeds; " in measured
    # Nor when no strategy reaches it: the seeds are those of the strategy run on the most of them.
    short = {
        "youku": {
            "random": curves["youku"]["random"],
            "entropy": curve(lambda n: n / 2600),
            "mean-entropy": {"0": curve(lambda n: n / 2700)["0"]},
        }
    }
    measured, _ = report.labels_saved({"select": {"figures": {"curves": short, "stop": 2000}}})
    assert "youku not reached (3 seeds; random's 80.00)" in measured


def test_the_ranking_speed_target_reads_select_beside_annotate():
    setups = {
        "local1": {"chars_per_s": 20000.0},
        "select-entropy": {"chars_per_s": 15000.0},
        "select-entropy2": {"chars_per_s": 30000.0},
    }
    record = {"annotate": {"figures": {"setups": setups, "docs": 120_000}}}
    measured, status = report.ranking_speed(record)
    assert status == "met" and "select-entropy 0.75x" in measured
    setups["select-entropy"]["chars_per_s"] = 9000.0
    assert report.ranking_speed(record)[1] == "not met"
    assert report.ranking_speed({})[1] == "not measured"


def test_the_accuracy_target_reads_the_saved_weights_shifts():
    """A save_weights setting (not exact) meets the accuracy target only within 0.1 F1 of float32 on every model."""
    rows = [
        {"f32": 0.9, "f": {"float16": 0.9, "int8-tables": 0.9002}},
        {"f32": 0.8, "f": {"float16": 0.8001, "int8-tables": 0.8}},
    ]
    records = {"weights16": {"figures": {"rows": rows}}}
    measured, status = report.same_entities(records)
    assert status == "met so far" and "within 0.01 (float16), 0.02 (int8-tables) of float32 on 2 models" in measured
    rows[1]["f"]["int8-tables"] = 0.798
    assert report.same_entities(records)[1] == "not met: a change moves F1 by over 0.1"
    del records["weights16"]
    measured, status = report.same_entities(records)  # the fixed-block products' retired run still counts
    assert status == "met so far" and "within 0.00 of row by row on 12 models" in measured and "HISTORY" in measured
    # The fixed-block products (bench_products --models) against row by row: not exact either.
    models = [
        {"f": {"blocks": 0.9, "row by row": 0.9003}, "same_docs": 0.998},
        {"f": {"blocks": 0.8, "row by row": 0.8}, "same_docs": 1.0},
    ]
    records["products"] = {"figures": {"models": models}}
    measured, status = report.same_entities(records)
    assert status == "met so far"
    assert "test F1 within 0.03 of row by row on 2 models, 99.80-100% of test docs" in measured
    models[0]["f"]["blocks"] = 0.8985
    assert report.same_entities(records)[1] == "not met: a change moves F1 by over 0.1"


def test_the_msra_robustness_target_shows_the_rescored_models():
    """The MSRA R-F1 target adds bench_sentence_encoding's MSRA rows (whole docs -> each sentence alone)."""
    records = {
        name: json.loads((report.RESULTS / f"{name}.json").read_text(encoding="utf8"))
        for name, _ in report.MSRA_DEFAULT + report.MSRA_BEFORE + report.MSRA_FAST
        if (report.RESULTS / f"{name}.json").exists()
    }
    if not records:
        pytest.skip("no MSRA results in bench/results")
    before, _ = report.msra_robustness(records)
    rows = [
        {"dataset": "msra", "system": "vectors", "seed": "seed2", "whole": {"r_f": 0.9953}, "predict": {"r_f": 0.9975}},
        {"dataset": "resume", "system": "vectors", "seed": "seed2", "whole": {"r_f": 0.99}, "predict": {"r_f": 1.0}},
    ]
    measured, status = report.msra_robustness({**records, "sentence_encoding": {"figures": {"rows": rows}}})
    assert measured.startswith(before) and "default.cfg before the rule seed 2 99.53 -> 99.75" in measured
    assert "resume" not in measured
    assert status.endswith('with "predict": 99.75-99.75 on the 1 re-scored model')


def test_the_training_accuracy_target_reads_a_tried_training_change():
    """A training change tried on Resume (bench_datasets' fgm2 run) is set against default.cfg's 3 seeds there."""
    records = {}
    for name, f in zip(report.SMALL_VECTORS_SEEDS, (95.7, 95.8, 95.9)):
        records[name] = {"figures": {"rows": [{"dataset": "resume", "system": "vectors", "f1": f, "dev_f1": f - 1}]}}
    assert report.training_accuracy(records) == ("no change to training yet", "n/a")
    records["datasets_resume_fgm2"] = {
        "figures": {"rows": [{"dataset": "resume", "system": "fgm2", "f1": 95.4, "dev_f1": 94.3}]}
    }
    measured, _ = report.training_accuracy(records)
    assert "Resume 95.40 (3 seeds) against default.cfg's 95.80 (-0.40, dev 94.30 against 94.80)" in measured
    assert "share" not in measured
    records[report.FGM_SHARE] = {
        "figures": {"rows": [{"dataset": "resume", "system": "quarter", "f1": 95.9, "dev_f1": 95.0}]}
    }
    measured, _ = report.training_accuracy(records)
    assert "a quarter of each batch (adversarial.share), Resume 95.90 (+0.10, dev 95.00)" in measured
    assert "a half" not in measured


def test_corpus_files_written_by_several_benchmarks_at_once(tmp_path):
    """bench_datasets._write from several threads onto one path: each writer renames its own temporary
    file (two bench_select runs of one dataset prepare its corpus at the same moment)."""
    from concurrent.futures import ThreadPoolExecutor

    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank("zh")
    datasets = _module("bench_datasets")
    path = tmp_path / "test.spacy"
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda i: datasets._write([nlp(f"句子{i}{j}") for j in range(200)], path), range(16)))
    assert len(list(DocBin().from_disk(path).get_docs(nlp.vocab))) == 200
    assert [p.name for p in tmp_path.iterdir()] == ["test.spacy"]


def test_bench_select_rounds(tmp_path, monkeypatch):
    """bench_select shares a seed's first round, trains random at --random-sizes and goes on from the
    rounds it kept. No training here: its train and evaluate are fakes that count calls."""
    import argparse

    import spacy
    from spacy.tokens import DocBin

    select = _module("bench_select")
    nlp = spacy.blank("zh")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "dev", "test"):
        DocBin(docs=[nlp(f"{split}句子{i}") for i in range(30)]).to_disk(corpus / f"{split}.spacy")
    trained = []

    def fake_train(config, round_corpus, work, seed, max_steps, one_thread):
        n = len(list(DocBin().from_disk(round_corpus / "train.spacy").get_docs(nlp.vocab)))
        trained.append((work.relative_to(tmp_path).as_posix(), n))
        return {"seconds": 1.0}

    monkeypatch.setattr(select, "train", fake_train)
    monkeypatch.setattr(select, "evaluate", lambda models, *a, **k: {"model": {"f": 0.5}})
    args = argparse.Namespace(
        out=tmp_path,
        start=5,
        step=5,
        stop=20,
        strategy_stop=0,
        random_sizes=[10, 20],
        max_steps=7,
        pool=0,
        dev_sentences=0,
    )
    curve = select.simulate("toy", corpus, "random", 0, args)
    assert sorted(int(n) for n in curve) == [5, 10, 20]
    assert trained == [("toy/start/seed0", 5), ("toy/random/seed0/n10", 10), ("toy/random/seed0/n20", 20)]
    first = json.loads((tmp_path / "toy/start/seed0/round.json").read_text())
    assert first["labelled"] == json.loads((tmp_path / "toy/random/seed0/n10/round.json").read_text())["labelled"][:5]
    select.simulate("toy", corpus, "random", 0, args)  # every round kept: nothing trained again
    assert len(trained) == 3
    args.max_steps = 8  # other settings: trained afresh
    select.simulate("toy", corpus, "random", 0, args)
    assert len(trained) == 6
    args.dev_sentences = 10
    select.simulate("toy", corpus, "random", 0, args)
    assert len(trained) == 9
    assert select._random_sizes(argparse.Namespace(random_sizes=None, start=200, step=200, stop=1000)) == [
        200,
        400,
        600,
        800,
        1000,
    ]
    # --warm-start: a round trains on from the previous round's model (sourced pipe, its vectors).
    configs = []
    monkeypatch.setattr(select, "train", lambda config, *rest: configs.append(config) or {"seconds": 1.0})
    pool, order = select._pool(corpus, 0)
    previous = str(tmp_path / "toy/start/seed0/model-best")
    record = select._round(tmp_path / "toy/warm/n10", order[:10], pool, corpus, 0, args, warm_from=previous)
    assert record["warm_from"] == previous and configs == [tmp_path / "toy/warm/n10/warm.cfg"]
    config = spacy.util.load_config(configs[0])
    assert dict(config["components"]["crf_ner"]) == {"source": previous} and config["paths"]["vectors"] == previous
    select._round(tmp_path / "toy/warm/n10", order[:10], pool, corpus, 0, args, warm_from=previous)
    assert len(configs) == 1  # kept
    select._round(tmp_path / "toy/warm/n10", order[:10], pool, corpus, 0, args)  # from scratch: another round
    assert len(configs) == 2 and configs[1].name == "default.cfg"
    assert select.curve_name("entropy", argparse.Namespace(warm_start=True)) == "entropy (warm)"
    assert select.curve_name("random", argparse.Namespace(warm_start=True, explore=0.2)) == "random (warm)"
    assert select.curve_name("random", argparse.Namespace(warm_start=False, explore=0.2)) == "random"
    assert select._folder("random", argparse.Namespace(warm_start=True, explore=0.2)) == "random-warm"
    # random with --warm-start: every --step up to --stop, each round on from the last, the same sentences.
    trained.clear()
    monkeypatch.setattr(select, "train", fake_train)
    args.warm_start = True
    curve = select.simulate("toy", corpus, "random", 0, args)
    assert sorted(int(n) for n in curve) == [5, 10, 15, 20] and [n for _, n in trained] == [10, 15, 20]
    rounds = [json.loads((tmp_path / f"toy/random-warm/seed0/n{n}/round.json").read_text()) for n in (10, 15, 20)]
    assert rounds[0]["warm_from"] == str(tmp_path / "toy/start/seed0/model-best")
    assert [r["warm_from"] for r in rounds[1:]] == [rounds[0]["model"], rounds[1]["model"]]
    assert rounds[2]["labelled"][:10] == rounds[0]["labelled"] == first["labelled"] + rounds[0]["labelled"][5:]
    assert select._done({"toy": {"random (warm)": {"0": curve}}}, "toy", "random (warm)", 0, args)
    assert (
        select.curve_name("entropy", argparse.Namespace(warm_start=True, explore=0.2)) == "entropy (warm, explore 0.2)"
    )
    assert select.curve_name("entropy", argparse.Namespace(warm_start=False, explore=0.2)) == "entropy (explore 0.2)"
    assert select._folder("entropy", argparse.Namespace(warm_start=True, explore=0.2)) == "entropy-warm-explore0.2"
    assert select.curve_name("entropy", argparse.Namespace(warm_start=True, power=1.0)) == "entropy (warm, power 1)"
    assert select._folder("entropy", argparse.Namespace(warm_start=True, power=1.0)) == "entropy-warm-power1"
    assert select._folder("random", argparse.Namespace(warm_start=True, power=1.0)) == "random-warm"
    dense = argparse.Namespace(warm_start=True, explore=0.2, density=1.0)
    assert select.curve_name("entropy", dense) == "entropy (warm, explore 0.2, density 1)"
    assert select._folder("entropy", dense) == "entropy-warm-explore0.2-density1"
    assert select._folder("random", dense) == "random-warm"
    # A ranking strategy's kept rounds are read back without ranking the pool again (no model is loaded).
    args.warm_start, trained[:] = False, []
    monkeypatch.setattr(spacy, "load", lambda *a, **k: pytest.fail("ranked again"))
    labelled = list(first["labelled"])
    for n in (10, 15, 20):
        labelled += [j for j in order if j not in labelled][:5]
        (tmp_path / f"toy/entropy/seed0/n{n}").mkdir(parents=True)
        (tmp_path / f"toy/entropy/seed0/n{n}/round.json").write_text(
            json.dumps(
                {
                    "labelled": labelled,
                    "max_steps": args.max_steps,
                    "dev_sentences": args.dev_sentences,
                    "f": n / 100,
                    "dev_f": None,
                    "train_s": 1.0,
                    "rank_s": 2.0,
                    "model": f"m{n}",
                    "warm_from": None,
                }
            )
        )
    curve = select.simulate("toy", corpus, "entropy", 0, args)
    assert {n: point["f"] for n, point in curve.items()} == {"5": 0.5, "10": 0.1, "15": 0.15, "20": 0.2}
    assert trained == []
    args.max_steps = 9  # other settings: the kept round does not follow, the pool is ranked again
    with pytest.raises(pytest.fail.Exception, match="ranked again"):
        select.simulate("toy", corpus, "entropy", 0, args)


def test_bench_select_finals_train_each_curves_labelled_sentences_from_scratch(tmp_path, monkeypatch):
    """--final-sizes: random's first N sentences (N: --stop and --random-final-sizes) and each strategy's
    labelled sentences at the sizes its rounds reached are trained once more from default.cfg, with
    --final-steps; kept and read back; a size a strategy's rounds did not reach is skipped, and said."""
    import argparse

    import spacy
    from spacy.tokens import DocBin

    select = _module("bench_select")
    nlp = spacy.blank("zh")
    corpus = tmp_path / "toy" / "corpus"
    corpus.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        DocBin(docs=[nlp(f"{split}句子{i}") for i in range(30)]).to_disk(corpus / f"{split}.spacy")
    trained = []

    def fake_train(config, round_corpus, work, seed, max_steps, one_thread):
        docs = list(DocBin().from_disk(round_corpus / "train.spacy").get_docs(nlp.vocab))
        trained.append((work.relative_to(tmp_path).as_posix(), [doc.text for doc in docs], max_steps, config.name))
        return {"seconds": 2.0}

    monkeypatch.setattr(select, "train", fake_train)
    monkeypatch.setattr(select, "evaluate", lambda models, *a, **k: {"model": {"f": 0.25 + 0.01 * len(trained)}})
    args = argparse.Namespace(
        out=tmp_path,
        seeds=[0],
        strategies=["random", "entropy"],
        warm_start=True,
        explore=0.2,
        stop=20,
        final_sizes=[10, 15],
        random_final_sizes=[15],
        final_steps=0,
        max_steps=7,
        jobs=1,
    )
    pool, order = select._pool(corpus, 0)
    chosen = [order[i] for i in (3, 1, 4, 0, 5, 9, 2, 6, 8, 7)]
    rounds = tmp_path / "toy" / "entropy-warm-explore0.2" / "seed0" / "n10"
    rounds.mkdir(parents=True)
    (rounds / "round.json").write_text(json.dumps({"labelled": chosen}))
    finals = select.train_finals("toy", corpus, args)
    assert sorted(finals) == ["entropy (warm, explore 0.2)", "random"]
    assert sorted(finals["random"]["0"], key=int) == ["15", "20"]
    assert list(finals["entropy (warm, explore 0.2)"]["0"]) == ["10"]  # no round at 15: no final there
    runs = {work: (texts, steps, config) for work, texts, steps, config in trained}
    assert runs["toy/random/seed0/final20"] == ([pool[i].text for i in order[:20]], 0, "default.cfg")
    assert runs["toy/entropy-warm-explore0.2/seed0/final10"] == ([pool[i].text for i in chosen], 0, "default.cfg")
    assert finals["random"]["0"]["20"]["train_s"] == 2.0
    select.train_finals("toy", corpus, args)  # kept: nothing trained again
    assert len(trained) == 3
    args.final_steps = 50  # other steps: trained afresh, with them
    select.train_finals("toy", corpus, args)
    assert len(trained) == 6 and {steps for _, _, steps, _ in trained[3:]} == {50}
    # The finals' table: the fewest labels at which a strategy's mean reaches random's at --stop.
    finals["entropy (warm, explore 0.2)"]["0"]["10"]["f"] = finals["random"]["0"]["20"]["f"]
    table = select.print_select(
        select.render_finals({"toy": finals}, args), {"finals": {"toy": finals}, "stop": args.stop}, ("finals",)
    )
    assert "| toy | entropy (warm, explore 0.2) | 1 |" in table and table.rstrip().endswith("| 10 |")


def test_bench_select_explore_picks_the_top_and_a_random_share_of_the_rest():
    """--explore F: a round takes the top (1 - F) of the ranking and draws the rest at random from
    the other candidates, near-duplicates left out of both."""
    import random

    select = _module("bench_select")
    texts = {j: f"第{j}条不同的句子，编号{j * 7919}" for j in range(100)}
    ranked = [(100.0 - j, j) for j in range(100)]  # 0 ranks best
    assert select.pick(ranked, texts, 10, 0.0, random.Random(0), 0) == list(range(10))
    chosen = select.pick(ranked, texts, 10, 0.2, random.Random(0), 0)
    assert chosen[:8] == list(range(8)) and len(set(chosen)) == 10
    assert all(j >= 8 for j in chosen[8:])
    draws = {tuple(select.pick(ranked, texts, 10, 0.2, random.Random(r), 0)[8:]) for r in range(5)}
    assert len(draws) > 1  # drawn, not the next two of the ranking every time
    texts[1] = texts[0]  # a near-duplicate of the best is left out; the next in the ranking takes its place
    assert select.pick(ranked, texts, 3, 0.0, random.Random(0), 0) == [0, 2, 3]


def test_bench_select_ranks_a_round_with_the_previous_rounds_model(tmp_path, monkeypatch):
    """A ranking strategy's round loads the previous round's model, scores the unlabelled pool with
    select's scores (score_docs) and labels the best --step (with --explore F, the best (1 - F) and a
    draw from the rest). Training is a fake that hands back one tiny trained crf_ner."""
    import argparse
    import random

    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example
    from thinc.api import Adam, fix_random_seed

    from spacy_cner.annotate.select import score_docs

    select = _module("bench_select")
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe(
        "crf_ner",
        config={
            "model": {
                "tok2vec": {"width": 16, "embed_width": 8, "char_rows": 200, "bigram_rows": 200},
                "encoder": {"width": 16},
            }
        },
    )
    train = [("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]), ("李四在北京工作", [(0, 2, "PER"), (3, 5, "LOC")])]
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in train]
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.01)
    for _ in range(20):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    model = tmp_path / "model"
    nlp.to_disk(model)
    rng = random.Random(0)
    chars = "张三李四王五赵六上海北京广州深圳去了在工作来自今天很好的和是一个公司大学教授市场"
    texts = ["".join(rng.choice(chars) for _ in range(rng.randint(6, 14))) for _ in range(30)]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "dev", "test"):
        DocBin(docs=[nlp.make_doc(t) for t in texts]).to_disk(corpus / f"{split}.spacy")

    def fake_train_and_score(work, *args, **kwargs):
        work.mkdir(parents=True, exist_ok=True)
        return {"f": 0.5, "dev_f": 0.5, "train_s": 1.0, "model": str(model)}

    monkeypatch.setattr(select, "_train_and_score", fake_train_and_score)
    pool, order = select._pool(corpus, 0)
    _, scores = score_docs(spacy.load(model), [pool[j].text for j in order[5:]], "entropy", 0)
    best = [j for _, j in sorted(zip(scores, order[5:]), key=lambda item: (-item[0], item[1]))]
    assert set(best[:5]) != set(order[5:10])  # the ranking is not the pool's order
    for explore in (0.0, 0.4):
        args = argparse.Namespace(
            out=tmp_path / f"runs{explore}",
            start=5,
            step=5,
            stop=10,
            strategy_stop=10,
            random_sizes=None,
            max_steps=7,
            pool=0,
            dev_sentences=0,
            explore=explore,
        )
        curve = select.simulate("toy", corpus, "entropy", 0, args)
        assert sorted(int(n) for n in curve) == [5, 10]
        labelled = json.loads(
            (args.out / "toy" / select._folder("entropy", args) / "seed0" / "n10" / "round.json").read_text()
        )["labelled"]
        assert labelled[:5] == order[:5]
        if explore == 0.0:
            assert labelled[5:] == best[:5]
        else:
            assert labelled[5:8] == best[:3] and set(labelled[8:]) <= set(best[3:])


def test_bench_select_plot_draws_each_curves_mean_and_sd_band(tmp_path, monkeypatch):
    """plot: one line per strategy at its mean over seeds, a band of ± the sample sd, saved to the path
    (matplotlib replaced by a recorder: the bench extra is not a test dependency)."""
    import types

    select = _module("bench_select")
    calls = []

    class Axes:
        def plot(self, x, y, **kwargs):
            calls.append(("plot", list(x), [round(v, 6) for v in y], kwargs.get("label")))

        def fill_between(self, x, low, high, **kwargs):
            calls.append(("band", list(x), [round(v, 6) for v in low], [round(v, 6) for v in high]))

        def __getattr__(self, name):
            return lambda *a, **k: None

    class Figure:
        def tight_layout(self):
            pass

        def savefig(self, path, **kwargs):
            calls.append(("save", path))

    pyplot = types.ModuleType("matplotlib.pyplot")
    pyplot.subplots = lambda **kwargs: (Figure(), Axes())
    matplotlib = types.ModuleType("matplotlib")
    matplotlib.use = lambda backend: None
    matplotlib.pyplot = pyplot
    monkeypatch.setitem(sys.modules, "matplotlib", matplotlib)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    curves = {
        "random": {"0": {"200": {"f": 0.5}, "400": {"f": 0.6}}, "1": {"200": {"f": 0.7}, "400": {"f": 0.6}}},
        "entropy": {"0": {"200": {"f": 0.5}, "400": {"f": 0.8}}},
    }
    select.plot(curves, "toy", tmp_path / "toy.png")
    assert calls == [
        ("plot", [200, 400], [60.0, 60.0], "random"),
        ("band", [200, 400], [round(60 - 14.142136, 6), 60.0], [round(60 + 14.142136, 6), 60.0]),
        ("plot", [200, 400], [50.0, 80.0], "entropy"),
        ("band", [200, 400], [50.0, 80.0], [50.0, 80.0]),
        ("save", tmp_path / "toy.png"),
    ]


def test_the_comparison_has_msras_row_from_its_seed_runs():
    """MSRA's seeds are one result each: the comparison (and the README) shows their mean and sd."""

    def seed_run(name, system, f1):
        return name, {
            "figures": {"rows": [{"dataset": "msra", "system": system, "f1": f1, "r_f1": 99.5, "seeds": [0]}]}
        }

    records = dict(
        [seed_run(name, system, f1) for (name, system), f1 in zip(report.MSRA_DEFAULT, (91.0, 92.0, 93.0))]
        + [seed_run(*report.MSRA_SPACY[0], 80.0)]
    )
    columns, _, rows = report.comparison(records)
    row = dict(zip(columns, next(row for row in rows if row[0].startswith("MSRA"))))
    free = next(column for column in columns if column.startswith("pretrain_free:"))
    assert row[free] == "92.00 ± 1.00" and row["fast.cfg (the default before)"] == ""
    assert row["spaCy `ner`"] == "80.00" and row["pretrain_free - spaCy"] == "+12.00"
    readme = report.render_readme_table(records)
    assert "| MSRA" in readme and report.MSRA_DEFAULT[2][0] in readme


def test_the_comparison_shows_the_lac_defaults_seeds_pooled_over_its_runs(monkeypatch):
    """configs/default.cfg (LAC's vectors) since 2026-11-28: a label's runs pooled, each seed's F1 once (a run of
    two seeds gives its f1_per_seed), with the count; a label without runs has an empty cell."""
    runs = {"Resume": [("one", "resume", "lac"), ("two", "resume", "lac")]}
    monkeypatch.setattr(report, "LAC_DEFAULT", runs)
    records = {
        "one": {"figures": {"rows": [{"dataset": "resume", "system": "lac", "f1": 95.0, "r_f1": 99.0, "seeds": [0]}]}},
        "two": {
            "figures": {
                "rows": [
                    {
                        "dataset": "resume",
                        "system": "lac",
                        "f1": 96.5,
                        "r_f1": 98.0,
                        "seeds": [1, 2],
                        "f1_per_seed": [96.0, 97.0],
                    }
                ]
            }
        },
    }
    columns, _, rows = report.comparison(records)
    cells = {row[0]: dict(zip(columns, row)) for row in rows}
    lac = "default: LAC's vectors (seeds so far)"
    assert cells["Resume"][lac] == "96.00 ± 1.00 (3 seeds)" and cells["Youku"][lac] == ""
    # R-F1: the runs' means weighted by their seeds, (99.0 + 2 x 98.0) / 3.
    assert cells["Resume"]["R-F1 default / pretrain_free / fast / TENER / spaCy"].startswith("98.33 / -")


def test_the_lac_targets_read_the_defaults_pooled_seeds_against_pretrain_free(monkeypatch):
    """Issue 55's "every other set >= today's default + 1.0": the LAC default's seeds of the comparison's runs pooled
    (not one variant's run), against pretrain_free's mean over its seed runs."""
    monkeypatch.setattr(report, "LAC_DEFAULT", {"Youku": [("full", "youku", "default")]})
    monkeypatch.setattr(report, "SMALL_VECTORS_SEEDS", ("s0", "s1"))
    free = lambda f1: {"figures": {"rows": [{"dataset": "youku", "system": "vectors", "f1": f1, "seeds": [0]}]}}  # noqa: E731
    row = {"dataset": "youku", "system": "default", "f1": 85.5, "dev_f1": 85.0, "seeds": [0, 1, 2]}
    records = {
        "s0": free(84.0),
        "s1": free(84.2),
        "full": {"figures": {"rows": [{**row, "f1_per_seed": [85, 85.5, 86]}]}},
    }
    text, status = report.lac_others(records, margin=1.0)
    assert (
        text == "youku default 85.50 (3 seeds, pretrain_free 84.10 (2 seeds))"
        and status == "met on set measured (1 of 4)"
    )
    records["full"]["figures"]["rows"][0]["f1_per_seed"] = [85, 85, 85]
    text, status = report.lac_others(records, margin=1.0)
    assert text.startswith("youku default 85.00") and status.startswith("not met")


def test_the_resume_training_time_target_prefers_todays_default():
    old = {"figures": {"tables": [[{"wall time": "**9.4 min** (563.2 s)"}, {"wall time": "12.8 min (769.1 s)"}]]}}
    assert report.resume_training({"resume_training_time": old}) == (
        "9.4 min, 12.8 min (`spacy train` alone, default threads, seeds 0 and 1)",
        "not met: +6.8 min",
    )
    now = {"figures": {"rows": [{"dataset": "resume", "system": "default", "training_min": 5.5, "f1": 95.6}]}}
    measured, status = report.resume_training({"resume_training_time": old, report.RESUME_TIME: now})
    assert measured.startswith("5.5 min (default.cfg") and "before its vectors" in measured and status == "met"


def test_the_reduced_precision_targets_read_bfloat16s_results():
    """int8's targets read precision "bfloat16": its F1 change on trained pipelines (bench_precision) and its
    chars/s against spaCy's `ner` (bench_speed's "ours, bfloat16")."""
    rows = [
        {
            "test": "/x/resume/corpus/test.spacy",
            "f": {"float32": 0.95, "bfloat16": 0.9481},
            "same_docs": 0.996,
            "alone_as_batched": True,
        },
        {
            "test": "/x/msra/corpus/test.spacy",
            "f": {"float32": 0.80, "bfloat16": 0.8004},
            "same_docs": 0.999,
            "alone_as_batched": True,
        },
    ]
    records = {"precision_models": {"figures": {"rows": rows}}}
    measured, status = report.int8_accuracy(records)
    assert status == "met (bfloat16)" and "within 0.19 of float32 on 2 models (msra, resume)" in measured
    rows[0]["f"]["bfloat16"] = 0.946
    assert report.int8_accuracy(records)[1] == "not met"
    speed = {"rows": [{"dataset": "resume", "chars_per_s": {"ours": 30.0, "ours, bfloat16": 45.0, "spaCy ner": 20.0}}]}
    records["speed_one_thread"] = {"figures": speed, "machine": {"cpu": "Some CPU"}}
    measured, status = report.int8_speed(records)
    assert 'precision "bfloat16" instead (one thread, on Some CPU): resume 2.25x' in measured
    assert status == "not met: -1.75x"


def test_publish_prints_the_section_and_saves_its_rows(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(sys, "argv", [str(BENCH / "bench_example.py")])
    section = common.Section("An example", "", [[{"system": "ours", "F1": 95.5}]])
    path = common.publish("example", {"f": 0.955}, section, notes="More.")
    assert "| ours | 95.5 |" in capsys.readouterr().out
    record = json.loads(path.read_text(encoding="utf8"))
    assert record["table_rows"] == [[{"system": "ours", "F1": 95.5}]] and record["notes"] == "More."


def test_the_shared_runner(tmp_path):
    """What the scripts share besides saving: runs --jobs at a time (in waves, or all queued), a child process's
    RESULT line, a bench_datasets model's names and test split, one-thread settings, the arguments."""
    import argparse
    import threading

    started, lock, running, most = [], threading.Lock(), [0], [0]

    def slow(run):
        with lock:
            started.append(run)
            running[0] += 1
            most[0] = max(most[0], running[0])
        threading.Event().wait(0.02)
        with lock:
            running[0] -= 1
        return run * 10

    assert common.run_all(slow, [3, 1, 2], 2) == {3: 30, 1: 10, 2: 20} and most[0] <= 2
    assert list(common.run_all(slow, [1, 2, 3, 4, 5], 2, waves=True)) == [1, 2, 3, 4, 5]
    assert common.run_all(slow, [], 2) == {}
    code = "import sys, json; print('noise'); print('RESULT ' + json.dumps({'args': sys.argv[1:]})); print('after')"
    assert common.run_child(code, tmp_path, 3) == {"args": [str(tmp_path), "3"]}
    with pytest.raises(SystemExit, match="Failed on X"):
        common.run_child("raise SystemExit(2)", failure=" on X")
    model = tmp_path / "out" / "msra" / "default" / "seed1" / "model-best"
    assert common.trained_model(model) == {
        "dataset": "msra",
        "system": "default",
        "seed": "seed1",
        "test": tmp_path / "out" / "msra" / "corpus" / "test.spacy",
    }
    assert common.single_thread({"PATH": "x"}) == {"PATH": "x", **dict.fromkeys(common.THREAD_VARIABLES, "1")}
    parser = argparse.ArgumentParser()
    common.add_data_argument(parser, "resume")
    common.add_out_argument(parser, "example")
    common.add_result_argument(parser, "example")
    args = parser.parse_args([])
    assert args.data == ROOT.parent / "shared" / "data" / "resume"
    assert (args.out, args.result) == (ROOT / "bench" / "runs" / "example", "example")


def test_train_once_keeps_a_finished_run(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(common, "train", lambda *a: calls.append(a) or {"seconds": 1.0, "peak_mb": 2.0})
    out = tmp_path / "run"
    assert common.train_once(Path("a.cfg"), tmp_path, out, 0, 10, True, ("--x=1",)) == {"seconds": 1.0, "peak_mb": 2.0}
    assert json.loads((out / "training_stats.json").read_text()) == {"seconds": 1.0, "peak_mb": 2.0}
    common.train_once(Path("a.cfg"), tmp_path, out, 0, 10, True)  # no model-best yet: trained again
    (out / "model-best").mkdir()
    common.train_once(Path("a.cfg"), tmp_path, out, 0, 10, True)
    assert len(calls) == 2 and calls[0] == (Path("a.cfg"), tmp_path, out, 0, 10, True, ("--x=1",))
    common.train_once(Path("a.cfg"), tmp_path, out, 0, 10, True, reuse=False)
    assert len(calls) == 3


def test_random_bert_scripts_render_their_rows():
    """bench_transformer's and bench_lexicon_adapter's tables from fake figures; their random encoder's overrides."""
    import argparse

    transformer = _module("bench_transformer")
    overrides = transformer.random_bert_overrides(100, 5e-4, Path("/bert"))
    assert overrides[:6] == transformer.training_schedule(100, 5e-4)
    assert overrides[6:] == ["--vars.transformer=/bert", "--components.crf_ner.tok2vec_learn_rate_scale=1.0"]
    args = argparse.Namespace(systems=["crf"], layers=2, width=64, max_steps=100, repeats=3)
    section = transformer.render(
        {"crf": {"seconds": 90.0, "peak_mb": 500.4}},
        {"crf": {"p": 0.9, "r": 0.8, "f": 0.85, "chars_per_s": 1234.4}},
        args,
    )
    assert section.tables == [
        [
            {
                "system": transformer.SYSTEMS["crf"][0],
                "test P": 90.0,
                "test R": 80.0,
                "test F1": 85.0,
                "training wall time min": 1.5,
                "training peak RSS MB": 500,
                "inference chars/s": 1234,
            }
        ]
    ]
    adapter = _module("bench_lexicon_adapter")
    args = argparse.Namespace(systems=["cpu"], seeds=[0, 1], jobs=2, max_steps=10, layers=2, width=64, bert_steps=5)
    training = {("cpu", 0): {"seconds": 60.0, "peak_mb": 100.0}, ("cpu", 1): {"seconds": 120.0, "peak_mb": 200.0}}
    scores = {("cpu", 0): {"p": 0.9, "r": 0.9, "f": 0.9}, ("cpu", 1): {"p": 0.8, "r": 0.8, "f": 0.8}}
    rows = adapter.render(training, scores, {"cpu": 999.6}, args).tables[0]
    assert rows[0]["test F1"] == 85.0 and rows[0]["F1 per seed"] == [90.0, 80.0] and rows[0]["test F1 sd"] == 7.07
    assert rows[0]["training wall time min"] == 1.5 and rows[0]["inference chars/s"] == 1000


def test_the_msra_target_reads_lacs_run_beside_pretrain_free():
    """Issue 55's MSRA target: LAC's F1 against the goal and its unseen-entity recall against pretrain_free's, which
    ran beside it (system "default" then); one seed says so; no result says which file is missing."""

    def row(system, f1, dev_f1, r_unseen):
        return {"dataset": "msra", "system": system, "f1": f1, "dev_f1": dev_f1, "r_unseen": r_unseen, "seeds": [0]}

    assert report.lac_msra({}, goal=92.0, recall_gain=3.0)[1] == "not measured"
    records = {report.LAC_MSRA: {"figures": {"rows": [row("default", 89.9, 90.5, 73.1), row("lac", 92.5, 91.0, 76.2)]}}}
    text, status = report.lac_msra(records, goal=92.0, recall_gain=3.0)
    assert text.startswith("92.50 (seed 0; pretrain_free beside seed 0 89.90; dev 91.00 against 90.50)")
    assert text.endswith("recall 76.2 against 73.1") and status == "met (1 seed of 3)"
    records[report.LAC_MSRA]["figures"]["rows"][1]["r_unseen"] = 75.0
    assert report.lac_msra(records, goal=92.0, recall_gain=3.0)[1] == "not met (1 seed of 3)"


def test_the_msra_target_pools_the_defaults_seeds_weighted_by_seed(monkeypatch):
    """With the default's MSRA runs in [comparison.lac] (seed 0 as "lac" beside pretrain_free, seeds 1-2 later), the
    target reads their seeds pooled: F1 over the three seeds, dev F1 and unseen recall weighted by each run's seeds."""
    runs = [(report.LAC_MSRA, "msra", "lac"), ("later", "msra", "default")]
    monkeypatch.setattr(report, "LAC_DEFAULT", {"MSRA": runs})
    side = [
        {"dataset": "msra", "system": "default", "f1": 90.0, "dev_f1": 86.9, "r_unseen": 69.0, "seeds": [0]},
        {"dataset": "msra", "system": "lac", "f1": 91.0, "dev_f1": 88.0, "r_unseen": 74.0, "seeds": [0]},
    ]
    later = {
        "dataset": "msra",
        "system": "default",
        "f1": 92.5,
        "f1_per_seed": [92.0, 93.0],
        "dev_f1": 88.6,
        "r_unseen": 77.0,
        "seeds": [1, 2],
    }
    records = {report.LAC_MSRA: {"figures": {"rows": side}}, "later": {"figures": {"rows": [later]}}}
    text, status = report.lac_msra(records, goal=92.0, recall_gain=3.0)
    assert text.startswith("92.00 (seeds 0, 1, 2; pretrain_free beside seed 0 90.00; dev 88.40 against 86.90)")
    assert text.endswith("recall 76.0 against 69.0") and status == "met"
    later["f1_per_seed"] = [91.0, 92.0]
    assert report.lac_msra(records, goal=92.0, recall_gain=3.0)[1] == "not met"


def test_profile_pipeline_times_each_stage_and_layer(tmp_path):
    """bench/profile_pipeline.py on a small trained pipeline: the top-level stages make up the total, the
    model's layers (in pre-order, indented by depth) each take at most their parent's time, and no label
    holds a '|' (a Markdown cell's end)."""
    from spacy.tokens import DocBin

    from conftest import TRAIN_DATA, write_docs
    from toy_pipe import load_trained

    nlp = load_trained("BIOES")
    nlp.to_disk(tmp_path / "model")
    corpus = write_docs(tmp_path / "test.spacy")
    rows, n_texts, n_chars = _module("profile_pipeline").profile(tmp_path / "model", corpus, depth=3, repeats=1)
    assert n_texts == len(TRAIN_DATA) and n_chars == sum(len(text) for text, _ in TRAIN_DATA)
    assert n_texts == len(list(DocBin().from_disk(corpus).get_docs(nlp.vocab)))
    us = {stage: value for stage, value, _ in rows}
    top = ["tokenizer", "crf_ner.predict", "crf_ner.set_annotations"]
    assert list(us)[:3] == top and list(us)[-1] == "total"
    assert sum(us[stage] for stage in top) == pytest.approx(us["total"])
    assert sum(share for stage, _, share in rows if stage in top) == pytest.approx(100.0)
    layers = [(stage.split(": ", 1)[1], value) for stage, value, _ in rows if stage.startswith("crf_ner.predict: ")]
    assert layers[0][0] == "0 crf_tagger" and layers[0][1] <= us["crf_ner.predict"]
    assert layers[-1][0] == "the rest (decoding, copies)"
    timed = {label.split(" ")[0]: value for label, value in layers[:-1]}
    assert len(timed) > 3 and all(value > 0 for value in timed.values())
    for path, value in timed.items():
        parent = path.rsplit(".", 1)[0]
        if parent != path and parent in timed:
            assert value <= timed[parent]
    assert not any("|" in stage for stage in us)


def test_a_superseded_result_is_named_in_its_questions_last_line_and_in_full_in_details(tmp_path):
    """A result whose file names its replacement ("superseded_by") loses its table in BENCHMARKS.md to a link in its
    question's last line; bench/DETAILS.md shows it in full under "Earlier runs", with the result replacing it; a
    superseded_by naming no result, or a result run before it, is refused."""
    records = report.load_records()
    old, new = "distill_resume_speed", "distill_resume_pieces_seeds"
    assert records[old]["superseded_by"] == new
    text = report.render_benchmarks(records)
    section = text[text.index('<a id="distillation-encoder">') : text.index('<a id="distillation-inputs">')]
    assert f"[`{old}`](bench/DETAILS.md#result-{old}) (by `{new}`)" in section.split("earlier runs a later one")[1]
    assert f"result-{old})" not in section.split("earlier runs a later one")[0]  # not under "Also measured"
    details = report.render_details(records)
    section = details[details.index('<a id="distillation-encoder">') : details.index('<a id="distillation-inputs">')]
    earlier = section[section.index("Earlier runs") :]
    assert f'<a id="result-{old}"></a>' in earlier and f"Replaced by [`{new}`](#result-{new}) (2026-11-29)." in earlier
    assert report.source_line(records[old]) in earlier
    for bad, message in (
        (dict(superseded_by="nowhere"), "names no other result"),
        (dict(date="2027-01-01"), "ran before"),
    ):
        broken = {name: dict(record) for name, record in records.items()}
        broken[old].update(bad)
        with pytest.raises(ValueError, match=message):
            report.check_superseded(broken)
    loop = {name: dict(record) for name, record in records.items()}
    loop[new]["superseded_by"] = old
    with pytest.raises(ValueError, match="loops"):
        report.check_superseded(loop)


def test_distillation_students_pool_their_seeds():
    """A bench_distill result in a pool_seeds question: one row per student config, its seeds' F1 and their mean."""
    table = report.students_table(report.load_records()["distill_ecommerce_patience4000"])
    columns, _, rows = table
    assert rows == [
        [
            "patience4000",
            "3",
            "74.41, 75.18, 75.17",
            "74.92",
            "-0.19",
            "default 75.11",
            "spacy_ner 64.15",
            "5.76-6.18",
            "3.33-3.58",
            "4.6",
        ]
    ]
    assert report.students_table({"figures": {"rows": [{"model": "x"}]}}) is None


def test_a_table_listing_seeds_as_rows_is_pooled():
    """Rows "NAME/seedN" become one row per NAME: its seeds, each number column's mean, text with its counts."""
    table = (
        ["model", "test F1", "chars/s", "change", "auto chose"],
        ["left", "right", "right", "right", "left"],
        [
            ["teacher/seed0", "90.00", "1,000", "+0.10", "threshold"],
            ["student/seed0", "80.00", "2,000", "-0.10", "threshold"],
            ["student/seed1", "81.00", "3,001", "+0.30", "best path"],
        ],
    )
    columns, align, rows = report.seed_rows_pooled(table)
    assert columns == ["model", "seeds", "test F1", "chars/s", "change", "auto chose"] and align[1] == "right"
    assert rows == [
        ["teacher", "1", "90.00", "1,000", "+0.10", "threshold"],
        ["student", "2", "80.50", "2,500", "+0.10", "threshold (1), best path (1)"],
    ]
    assert report.seed_rows_pooled((["model"], ["left"], [["teacher"]])) is None


def _datasets_result(name: str, dataset: str, systems) -> dict:
    rows = [{"dataset": dataset, "system": system, "test F1": f1} for system, f1 in systems]
    return {
        "name": name,
        "title": f"Datasets on {dataset}",
        "command": f"python bench/bench_datasets.py --datasets {dataset} --result {name}",
        "date": "2026-12-03T00:00:00",
        "machine": {"line": "2 cores"},
        "code_version": {"commit": "a" * 40, "dirty": False},
        "figures": {"rows": rows},
        "table_rows": [rows],
    }


def test_a_new_result_joins_its_question_by_pattern():
    """lac-fine-tuned names lac_finetune_*: a new dataset's file joins its question, no edit anywhere; a headline
    given by the pattern renders every such file into its one table."""
    records = {
        "lac_finetune_resume_seed0": _datasets_result("lac_finetune_resume_seed0", "resume", [("lac_finetune", 95.0)]),
        "lac_finetune_youku_seed0": _datasets_result("lac_finetune_youku_seed0", "youku", [("lac_finetune", 85.0)]),
    }
    question = next(question for question in report.QUESTIONS if question.key == "lac-fine-tuned")
    by_pattern = question._replace(headline=["lac_finetune_*"])
    found = report.answer(records, by_pattern)
    assert [name for name, _ in found.headline] == ["lac_finetune_resume_seed0", "lac_finetune_youku_seed0"]
    (table,) = report.result_tables(records, by_pattern._replace(results=found.headline))
    assert [row[0] for row in table[2]] == ["resume", "youku"]
    new = "lac_finetune_peoples_daily_seed0"
    text = report.render_benchmarks({**report.load_records(), new: _datasets_result(new, "peoples_daily", [])})
    section = text[text.index('<a id="lac-fine-tuned">') : text.index('<a id="serving">')]
    assert new in section and "## Other results" not in text


def test_a_headline_names_current_results_of_its_question():
    entry = {"key": "q", "title": "Q", "results": ["a_*", "b"], "headline": ["a_*", "c"]}
    with pytest.raises(ValueError, match="headline names c, not among its results"):
        report._questions([entry])
    (question,) = report._questions([{**entry, "headline": ["b"]}])
    records = {name: {"date": "2026-12-0" + day} for name, day in (("a_1", "1"), ("b", "1"), ("c", "2"))}
    found = report.answer(records, question)
    assert found.headline == [("b", "")] and found.also == ["a_1"]
    records["b"]["superseded_by"] = "c"
    with pytest.raises(ValueError, match="headline names b, replaced by a later run"):
        report.answer(records, question)


def test_dev_curves_side_by_side_keep_each_logs_evaluations(tmp_path):
    """bench/plot_dev_curve.py's table from two console logs: the steps at the multiples asked for that either
    log evaluated (an empty cell where one did not, no step 0), and each log's first best and last row."""
    header = "E    #    LOSS CRF_NER  ENTS_F  ENTS_P  ENTS_R  SCORE\n---  ------  " + "  ".join(["------"] * 5) + "\n"
    logs = []
    for name, rows in (("a", [(0, 0, 0.0), (0, 200, 70.0), (1, 400, 80.0), (1, 600, 80.0)]), ("b", [(0, 200, 75.0)])):
        lines = "".join(f"  {e}  {s}  12.50  {f:.2f}  {f:.2f}  {f:.2f}  {f / 100:.2f}\n" for e, s, f in rows)
        log = tmp_path / name / "seed0" / "train.log"
        log.parent.mkdir(parents=True)
        log.write_text("\x1b[1m" + header + "\x1b[0m" + lines, encoding="utf8")
        logs.append(log)
    plot = _module("plot_dev_curve")
    curves = {"a": plot.dev_curve(logs[0]), "b": plot.dev_curve(logs[1])}
    assert curves["a"] == [(0, 0, 0.0), (0, 200, 70.0), (1, 400, 80.0), (1, 600, 80.0)]
    by_step, summary = plot.curve_rows(curves, every=200)
    assert by_step == [
        {"step": 200, "a": 70.0, "b": 75.0},
        {"step": 400, "a": 80.0, "b": None},
        {"step": 600, "a": 80.0, "b": None},
    ]
    assert [row["step"] for row in plot.curve_rows(curves, every=400)[0]] == [400]
    assert summary[0] == {
        "training": "a",
        "best dev F1": 80.0,
        "best at step": 400,
        "best in epoch": 1,
        "last dev F1": 80.0,
        "last step": 600,
    }
    assert summary[1]["best at step"] == summary[1]["last step"] == 200
    for rows in (by_step, summary):
        common.rows_table(rows)  # raises on a cell a table cannot show
