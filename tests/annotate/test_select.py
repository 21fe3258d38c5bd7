"""`python -m spacy_cner select`: texts ranked by crf_ner's exact marginals, written for annotation tools."""

import collections
import json
import random
import subprocess
import sys

import numpy
import pytest
import spacy
from spacy.training import Example
from thinc.api import Adam, fix_random_seed

import reference
from spacy_cner.annotate.job import AnnotateJob
from spacy_cner.annotate.select import STRATEGIES, NearDuplicates, Typicality, pick, power_key, score_docs, select
from spacy_cner.annotate.uncertainty import strategy_score
from spacy_cner.corpus.convert import iter_docs
from spacy_cner.layers._torch import torch_module
from spacy_cner.tags import tags_to_spans

TRAIN = [
    ("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("李四在北京工作", [(0, 2, "PER"), (3, 5, "LOC")]),
    ("王五来自广州", [(0, 2, "PER"), (4, 6, "LOC")]),
]
SMALL = {"tok2vec": {"width": 16, "embed_width": 8, "char_rows": 200, "bigram_rows": 200}, "encoder": {"width": 16}}
TEXTS = ["张三在上海", "李四去了广州", "王五在北京", "今天天气很好", "张三去了北京工作", "赵六来自上海"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A small crf_ner trained a few steps: sure of some spans, unsure of others; temperature 1.5."""
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"model": SMALL, "ents_threshold": 0.3})
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in TRAIN]
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.01)
    for _ in range(26):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    nlp.get_pipe("crf_ner").cfg["temperature"] = 1.5
    path = tmp_path_factory.mktemp("al") / "model"
    nlp.to_disk(path)
    return path


def brute_force(pipe, doc, temperature):
    """Every valid tag sequence's probability: the token marginals and every span's probability."""
    (emissions,) = pipe._decode([doc], best_path=False).emissions
    crf = torch_module(pipe.model.get_ref("crf"))
    scores = tuple(
        crf.parametrizations[name].original.detach().double().numpy() / temperature
        for name in ("start_transitions", "transitions", "end_transitions")
    )
    emissions = numpy.asarray(emissions, dtype="float64") / temperature
    names = pipe.tag_names
    paths = list(reference.valid_paths(names, len(doc)))
    logs = numpy.asarray([reference.path_score(scores, emissions, path) for path in paths])
    probs = numpy.exp(logs - reference.logsumexp(logs))
    marginals = numpy.zeros((len(doc), len(names)))
    spans = {}
    for path, p in zip(paths, probs):
        marginals[numpy.arange(len(doc)), path] += p
        for span in tags_to_spans([names[t] for t in path]):
            spans[span] = spans.get(span, 0.0) + p
    return marginals, spans


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "random"])
def test_scores_equal_brute_force_over_every_tag_sequence(model_dir, strategy):
    nlp = spacy.load(model_dir)
    pipe = nlp.get_pipe("crf_ner")
    texts = ["张三在上海", "李四去广州"]
    docs, scores = score_docs(nlp, texts, strategy)
    for doc, score in zip(docs, scores):
        marginals, spans = brute_force(pipe, nlp.make_doc(doc.text), 1.5)
        considered = [p for p in spans.values() if p >= pipe.candidate_threshold]
        assert considered and any(0.2 < p < 0.8 for p in considered)  # some uncertainty to rank by
        expected = strategy_score(strategy, marginals, considered)
        assert score == pytest.approx(expected, rel=1e-6, abs=1e-9)
        # the doc's entities carry the same probabilities
        for ent in doc.ents:
            assert ent._.score == pytest.approx(spans[(ent.start, ent.end, ent.label_)], abs=1e-6)


def test_strategy_scores_by_hand():
    marginals = numpy.asarray([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    assert strategy_score("entropy", marginals, []) == pytest.approx(numpy.log(2))
    assert strategy_score("mean-entropy", marginals, []) == pytest.approx(numpy.log(2) / 2)
    assert strategy_score("least-confident", marginals, [0.9, 0.4, 0.2]) == pytest.approx(0.4)
    assert strategy_score("expected-count", marginals, [0.9, 0.4]) == pytest.approx(0.09 + 0.24)
    assert strategy_score("least-confident", marginals, []) == 0.0
    first, again = strategy_score("random", None, [], "文本", 0), strategy_score("random", None, [], "文本", 0)
    assert first == again != strategy_score("random", None, [], "文本", 1) and 0 <= first < 1
    with pytest.raises(ValueError, match="Unknown strategy 'best'"):
        strategy_score("best", marginals, [])


def test_near_duplicates_are_left_out():
    guard = NearDuplicates(0.7)
    assert guard.add("张三去了上海参加会议")
    assert not guard.add("张三去了上海参加会议")  # the same text
    assert not guard.add("张三去了上海参加会议。")  # 8 of its 9 3-grams
    assert guard.add("李四在北京工作")
    assert guard.add("")
    assert not guard.add("")
    with pytest.raises(ValueError, match="Jaccard"):
        NearDuplicates(0.0)


def test_select_writes_the_top_texts_best_first_and_names_bad_rows(model_dir, tmp_path):
    rows = [json.dumps({"text": t, "id": i}, ensure_ascii=False) for i, t in enumerate(TEXTS)]
    rows.insert(2, "{not json")
    rows.append(json.dumps({"text": TEXTS[0], "id": 99}, ensure_ascii=False))  # a duplicate of row 0
    source = tmp_path / "pool.jsonl"
    source.write_text("\n".join(rows) + "\n", encoding="utf8")
    out = tmp_path / "next.jsonl"
    summary = select(AnnotateJob(str(model_dir)), str(source), 4, out, strategy="expected-count")
    records = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
    _, scores = score_docs(spacy.load(model_dir), TEXTS, "expected-count")
    best = sorted(range(len(TEXTS)), key=lambda i: (-scores[i], i))[:4]
    assert [r["id"] for r in records] == best
    assert [r["select"]["score"] for r in records] == pytest.approx([scores[i] for i in best])
    assert records[0]["select"]["source"] == f"{source}, line {best[0] + 1 + (best[0] >= 2)}"
    assert (summary.texts, summary.errors, summary.selected) == (len(TEXTS) + 1, 1, 4)
    (error,) = [json.loads(line) for line in (tmp_path / "next.jsonl.errors.jsonl").read_text("utf8").splitlines()]
    assert error["error"].startswith(f"{source}, line 3: not JSON")
    # Near-duplicates: the repeated text comes out once, whatever its score.
    summary = select(AnnotateJob(str(model_dir)), str(source), 7, out, strategy="expected-count")
    texts = [json.loads(line)["text"] for line in out.read_text(encoding="utf8").splitlines()]
    assert sorted(texts) == sorted(TEXTS) and summary.near_duplicates == 1
    select(AnnotateJob(str(model_dir)), str(source), 7, out, strategy="expected-count", diversity=None)
    assert len(out.read_text(encoding="utf8").splitlines()) == 7


def test_pick_takes_the_top_then_the_drawn_share():
    ranked, drawn = list("abcdefghij"), list("jihgfedcba")
    assert pick(ranked, drawn, 5, 0.0) == (list("abcde"), [])
    assert pick(ranked, drawn, 5, 0.4) == (list("abc"), list("ji"))
    # What keep refuses is passed over in both parts; an item taken from the ranking is not drawn again.
    assert pick(ranked, list("abxyz"), 4, 0.5, keep=lambda item: item != "b") == (list("ac"), list("xy"))
    asked = []  # keep (a near-duplicate guard counting what it refuses) is asked once per item
    assert pick(ranked, list("bacxy"), 4, 0.5, keep=lambda item: asked.append(item) or item != "b") == (
        list("ac"),
        list("xy"),
    )
    assert asked == list("abcxy")
    with pytest.raises(ValueError, match="explore"):
        pick(ranked, drawn, 5, 1.0)


@pytest.fixture
def pool(model_dir, tmp_path):
    """60 texts in a file, and their entropy scores."""
    texts = [
        f"{name}{verb}{place}"
        for name in ("张三", "李四", "王五", "赵六")
        for verb in ("去了", "来自", "在")
        for place in ("上海", "北京", "广州", "深圳", "杭州")
    ]
    source = tmp_path / "pool.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf8")
    _, scores = score_docs(spacy.load(model_dir), texts, "entropy")
    return texts, source, scores


def test_select_explore_draws_a_share_at_random(model_dir, tmp_path, pool):
    """--explore: the top of the ranking, then texts drawn at random (seeded) from the others, marked."""
    texts, source, scores = pool
    out = tmp_path / "next.jsonl"
    best = [texts[i] for i in sorted(range(len(texts)), key=lambda i: (-scores[i], i))]
    draws = []
    for seed in (0, 1, 2):
        summary = select(
            AnnotateJob(str(model_dir)),
            str(source),
            10,
            out,
            strategy="entropy",
            explore=0.3,
            diversity=None,
            seed=seed,
        )
        records = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
        assert (summary.selected, summary.drawn) == (10, 3) and len({r["text"] for r in records}) == 10
        assert [r["text"] for r in records[:7]] == best[:7] and not any("explore" in r["select"] for r in records[:7])
        assert all(r["select"]["explore"] is True and r["text"] not in best[:7] for r in records[7:])
        draws.append([r["text"] for r in records[7:]])
    again = select(
        AnnotateJob(str(model_dir)), str(source), 10, out, strategy="entropy", explore=0.3, diversity=None, seed=2
    )
    assert [json.loads(line)["text"] for line in out.read_text(encoding="utf8").splitlines()][7:] == draws[2]
    assert again.drawn == 3 and len({tuple(d) for d in draws}) > 1  # seeded: the same draw again, another seed another
    assert any(text not in best[:10] for draw in draws for text in draw)  # drawn, not the next of the ranking
    with pytest.raises(ValueError, match="explore"):
        select(AnnotateJob(str(model_dir)), str(source), 10, out, explore=-0.1)


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_power_keys_draw_without_replacement_in_proportion_to_score_to_the_power(power):
    """The top key is text i with probability s_i^power / sum; the top two are a draw without
    replacement (the second in proportion among the rest); a score of 0 comes after every positive one."""
    scores = [1.0, 2.0, 3.0, 4.0, 0.0]
    weights = numpy.asarray(scores) ** power
    p = weights / weights.sum()
    rng, trials = random.Random(0), 40_000
    firsts, pairs = collections.Counter(), collections.Counter()
    for _ in range(trials):
        keys = [power_key(score, power, rng) for score in scores]
        order = sorted(range(len(scores)), key=lambda i: -keys[i])
        firsts[order[0]] += 1
        pairs[frozenset(order[:2])] += 1
        assert order[-1] == 4
    # Binomial standard deviations are at most 0.0025 here: 0.015 is six of them.
    assert [firsts[i] / trials for i in range(4)] == pytest.approx(p[:4], abs=0.015)
    pair = p[2] * p[3] / (1 - p[2]) + p[3] * p[2] / (1 - p[3])
    assert pairs[frozenset({2, 3})] / trials == pytest.approx(pair, abs=0.015)
    # A large power is the top of the ranking.
    assert max(range(4), key=lambda i: power_key(scores[i], 1e6, rng)) == 3


def test_select_power_draws_every_text_by_its_score(model_dir, tmp_path, pool):
    """--power: the n texts drawn by power_key (seeded), their own scores written; a huge power is the top n."""
    texts, source, scores = pool
    out = tmp_path / "next.jsonl"
    score_of = dict(zip(texts, scores))
    draws = []
    for seed in (0, 1, 2, 0):
        summary = select(
            AnnotateJob(str(model_dir)), str(source), 10, out, strategy="entropy", power=1.0, diversity=None, seed=seed
        )
        records = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
        assert (summary.selected, summary.drawn) == (10, 0) and len({r["text"] for r in records}) == 10
        assert all(
            r["select"]["power"] == 1.0 and r["select"]["score"] == pytest.approx(score_of[r["text"]]) for r in records
        )
        draws.append([r["text"] for r in records])
    best = sorted(scores, reverse=True)[:10]
    assert draws[3] == draws[0] and len({tuple(d) for d in draws}) == 3  # seeded: the same draw again
    assert any(sorted((score_of[t] for t in draw), reverse=True) != best for draw in draws)  # not the top
    select(AnnotateJob(str(model_dir)), str(source), 10, out, strategy="entropy", power=1e9, diversity=None)
    chosen = [score_of[json.loads(line)["text"]] for line in out.read_text(encoding="utf8").splitlines()]
    assert sorted(chosen, reverse=True) == pytest.approx(best, rel=1e-6)
    for bad, message in (
        ({"power": 0.0}, "above 0"),
        ({"power": 1.0, "explore": 0.2}, "without explore"),
        ({"power": 1.0, "strategy": "random"}, "without the random strategy"),
    ):
        with pytest.raises(ValueError, match=message):
            select(AnnotateJob(str(model_dir)), str(source), 10, out, **{"strategy": "entropy", **bad})


def test_typicality_is_the_mean_cosine_similarity_to_the_pool():
    """Typicality equals the brute-force mean over the pool of the cosine similarity of character uni-
    and bigram TF-IDF vectors (smoothed idf, as scikit-learn's), whitespace left out; a text repeated
    in the pool is more typical than an odd one."""
    texts = ["张三去了上海", "张三去了北京", "张三 去了上海", "李四去了广州", "今天天气很好", "张三去了上海"]
    typicality = Typicality(lambda: iter(texts))
    grams = [[*t.replace(" ", "")] + [a + b for a, b in zip(t.replace(" ", ""), t.replace(" ", "")[1:])] for t in texts]
    vocabulary = sorted({g for gs in grams for g in gs})
    df = numpy.array([sum(g in gs for gs in grams) for g in vocabulary])
    idf = numpy.log((1 + len(texts)) / (1 + df)) + 1
    vectors = numpy.array([[gs.count(g) for g in vocabulary] for gs in grams]) * idf
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    expected = (vectors @ vectors.T).mean(axis=1)
    assert [typicality(t) for t in texts] == pytest.approx(expected, rel=1e-9)
    assert typicality("张三去了上海") > typicality("李四去了广州") > typicality("今天天气很好") > 0
    assert typicality("") == 0.0 and typicality("😀") == 0.0  # nothing in common with the pool


def test_select_density_ranks_by_score_times_typicality(model_dir, tmp_path, pool):
    """--density B: the n texts of the largest score * typicality ** B, each written with its own
    score, the density and its typicality; refused with the random strategy or B <= 0."""
    texts, source, scores = pool
    out = tmp_path / "next.jsonl"
    typicality = Typicality(lambda: iter(texts))
    for density in (1.0, 3.0):
        select(AnnotateJob(str(model_dir)), str(source), 10, out, strategy="entropy", density=density, diversity=None)
        records = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
        keys = [scores[i] * typicality(texts[i]) ** density for i in range(len(texts))]
        best = sorted(range(len(texts)), key=lambda i: (-keys[i], i))[:10]
        assert [r["text"] for r in records] == [texts[i] for i in best]
        # Element by element: pytest.approx takes no nested lists since pytest 9.
        assert [r["select"]["score"] for r in records] == pytest.approx([scores[i] for i in best])
        assert [r["select"]["typicality"] for r in records] == pytest.approx([typicality(texts[i]) for i in best])
        assert all(r["select"]["density"] == density for r in records)
    plain = sorted(range(len(texts)), key=lambda i: (-scores[i], i))[:10]
    assert [r["text"] for r in records] != [texts[i] for i in plain]  # the weight moved the ranking
    for bad in ({"density": 0.0}, {"density": 1.0, "strategy": "random"}):
        with pytest.raises(ValueError, match="density"):
            select(AnnotateJob(str(model_dir)), str(source), 10, out, **{"strategy": "entropy", **bad})


def annotated_export(record, output_format, index):
    """What the tool exports once the annotator accepts the model's entities as they are, in its
    documented shape: Prodigy's ner_manual answer (tokens, token_start/token_end, answer, hashes),
    doccano's JSONL export (id, "entities" with start_offset/end_offset; our other fields kept as
    doccano keeps imported metadata), Label Studio's task with "annotations" (the predictions
    submitted); jsonl: the record as it is."""
    if output_format == "prodigy":
        text = record["text"]
        tokens = [{"text": c, "start": i, "end": i + 1, "id": i, "ws": False} for i, c in enumerate(text)]
        spans = [{**span, "token_start": span["start"], "token_end": span["end"] - 1} for span in record["spans"]]
        return {
            **record,
            "tokens": tokens,
            "spans": spans,
            "_input_hash": index,
            "_task_hash": -index,
            "_view_id": "ner_manual",
            "answer": "accept",
        }
    if output_format == "doccano":
        entities = [
            {"id": 100 * index + k, "label": label, "start_offset": s, "end_offset": e}
            for k, (s, e, label) in enumerate(record["label"])
        ]
        kept = {key: value for key, value in record.items() if key != "label"}
        return {"id": index + 1, **kept, "entities": entities, "relations": [], "Comments": []}
    if output_format == "labelstudio":
        return {
            **record,
            "id": index + 1,
            "annotations": [{"id": index + 1, "result": record["predictions"][0]["result"], "was_cancelled": False}],
        }
    return record


@pytest.mark.parametrize("output_format", ["jsonl", "prodigy", "doccano", "labelstudio"])
def test_each_format_reads_back_through_convert_once_annotated(model_dir, tmp_path, output_format):
    """The annotator accepts the model's entities as they are and exports them from the tool:
    convert gives back the same texts and entities (Label Studio's offsets count UTF-16 units: a text
    with an emoji checks them); each entity carries the model's probability of it (ent._.score)."""
    source = tmp_path / "pool.txt"
    texts = TEXTS + ["😀张三去了上海"]
    source.write_text("\n".join(texts) + "\n", encoding="utf8")
    out = tmp_path / ("next.json" if output_format == "labelstudio" else "next.jsonl")
    select(AnnotateJob(str(model_dir)), str(source), len(texts), out, strategy="entropy", output_format=output_format)
    nlp = spacy.load(model_dir)
    docs = list(nlp.pipe(texts))
    expected = {doc.text: [(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in docs}
    probability = {(doc.text, e.start_char, e.end_char, e.label_): e._.score for doc in docs for e in doc.ents}
    assert any(expected.values())
    if output_format == "labelstudio":
        records = json.loads(out.read_text(encoding="utf8"))
        for task in records:
            assert task["predictions"][0]["score"] == task["meta"]["score"]
            text = task["data"]["text"]
            for item in task["predictions"][0]["result"]:
                start = len(text.encode("utf-16-le")[: 2 * item["value"]["start"]].decode("utf-16-le"))
                key = (text, start, start + len(item["value"]["text"]), item["value"]["labels"][0])
                assert item["score"] == pytest.approx(probability[key], abs=1e-6)
    else:
        records = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
        for record in records:
            if output_format in ("prodigy", "jsonl"):
                for span in record["spans"]:
                    key = (record["text"], span["start"], span["end"], span["label"])
                    assert span["score"] == pytest.approx(probability[key], abs=1e-6)
    exported = [annotated_export(record, output_format, i) for i, record in enumerate(records)]
    if output_format == "labelstudio":
        out.write_text(json.dumps(exported, ensure_ascii=False), encoding="utf8")
    else:
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in exported), encoding="utf8")
    read = {doc.text: [(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in iter_docs(out)}
    assert read == expected


def test_select_fills_the_batch_when_near_duplicates_crowd_the_top(model_dir, tmp_path):
    """Copies of the best text fill the ranked pool (POOL_FACTOR * n): select keeps more of the
    ranking until n texts that are no near-duplicates are found, with or without explore."""
    source = tmp_path / "pool.txt"
    _, scores = score_docs(spacy.load(model_dir), TEXTS, "entropy")
    best = TEXTS[int(numpy.argmax(scores))]
    source.write_text("\n".join([best] * 40 + TEXTS) + "\n", encoding="utf8")
    for explore in (0.0, 0.4):
        out = tmp_path / f"next{explore}.jsonl"
        summary = select(AnnotateJob(str(model_dir)), str(source), 5, out, strategy="entropy", explore=explore)
        chosen = [json.loads(line)["text"] for line in out.read_text(encoding="utf8").splitlines()]
        assert summary.selected == len(chosen) == 5 and len(set(chosen)) == 5 and chosen[0] == best
        assert summary.near_duplicates >= 39 and summary.texts == 46
    summary = select(AnnotateJob(str(model_dir)), str(source), 10, tmp_path / "all.jsonl", strategy="entropy")
    assert summary.selected == len(TEXTS)  # all the input holds, once the copies are left out


def test_select_output_inside_the_input_folder_is_never_read_as_input(model_dir, tmp_path, monkeypatch):
    """OUT, OUT.errors.jsonl and OUT.scores/ inside the input folder are not input: a killed run resumes
    from its shards (nothing scored again) and a rerun reads the same texts."""
    import spacy_cner.annotate.select as select_module

    pool = tmp_path / "pool"
    pool.mkdir()
    (pool / "a.txt").write_text("\n".join(TEXTS[:3]) + "\n", encoding="utf8")
    (pool / "b.jsonl").write_text(
        "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in TEXTS[3:]) + "not json\n", encoding="utf8"
    )
    out = pool / "next.jsonl"
    first = select(AnnotateJob(str(model_dir)), str(pool), 4, out, strategy="entropy")
    assert (first.texts, first.errors, first.selected) == (6, 1, 4) and (pool / "next.jsonl.errors.jsonl").exists()
    written = out.read_text(encoding="utf8")

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(select_module, "selection_text", killed)
    with pytest.raises(KeyboardInterrupt):
        select(AnnotateJob(str(model_dir)), str(pool), 4, out, strategy="entropy")
    assert any((pool / "next.jsonl.scores").glob("*.jsonl"))
    monkeypatch.undo()
    again = select(AnnotateJob(str(model_dir)), str(pool), 4, out, strategy="entropy")
    assert again.characters == 0  # resumed: every shard was scored before
    assert (again.texts, again.errors) == (6, 1) and out.read_text(encoding="utf8") == written


def test_select_resumed_after_the_input_changed_scores_it_afresh(model_dir, tmp_path, monkeypatch, pool):
    """A killed select resumed after a line was inserted at the top of its input: before, the shards
    scored from the old content were kept (rows whose `source` line held another text, the new line
    never scored); now the folder is scored again, with a warning naming the file: what one run gives."""
    import spacy_cner.annotate.select as select_module

    texts, source, _ = pool
    out = tmp_path / "next.jsonl"

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(select_module, "selection_text", killed)
    with pytest.raises(KeyboardInterrupt):
        select(AnnotateJob(str(model_dir)), str(source), 50, out, strategy="entropy", shard_size=20, diversity=None)
    monkeypatch.undo()
    (out.parent / "next.jsonl.scores" / "pool.00002.jsonl").unlink()  # killed while scoring the last shard
    (out.parent / "next.jsonl.scores" / ".annotate" / "done" / "pool.json").unlink()
    lines = ["王五去了北京"] + texts
    source.write_text("\n".join(lines) + "\n", encoding="utf8")
    with pytest.warns(UserWarning, match=r"pool\.txt changed since .*scores was scored"):
        select(AnnotateJob(str(model_dir)), str(source), 50, out, strategy="entropy", shard_size=20, diversity=None)
    records = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
    assert all(lines[int(r["select"]["source"].rsplit(" ", 1)[1]) - 1] == r["text"] for r in records)
    fresh = tmp_path / "fresh.jsonl"
    select(AnnotateJob(str(model_dir)), str(source), 50, fresh, strategy="entropy", shard_size=20, diversity=None)
    assert out.read_text(encoding="utf8") == fresh.read_text(encoding="utf8")


def test_select_never_writes_over_an_input_file_or_a_folder_it_did_not_make(model_dir, tmp_path):
    """-o naming an input file (or OUT.errors.jsonl being one) is refused, as are -o a folder and -o below a
    file; OUT.scores/ holding other files is refused and left as it was. Select's own earlier output in
    the input folder is still replaced (as the test above shows)."""
    pool = tmp_path / "pool"
    pool.mkdir()
    (pool / "a.txt").write_text("\n".join(TEXTS[:3]) + "\n", encoding="utf8")
    (pool / "b.jsonl").write_text(
        "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in TEXTS[3:]), encoding="utf8"
    )
    (pool / "c.errors.jsonl").write_text(json.dumps({"text": TEXTS[0]}, ensure_ascii=False) + "\n", encoding="utf8")
    before = {p: p.read_bytes() for p in pool.iterdir()}
    for out, said in (
        (pool / "a.txt", "output .*a.txt is one of the input files"),
        (pool / "b.jsonl", "output .*b.jsonl is one of the input files"),
        (pool / "c", "errors file .*c.errors.jsonl is one of the input files"),
        (pool, "is a folder"),
        (pool / "a.txt" / "next.jsonl", "a.txt is a file, not a folder"),
    ):
        with pytest.raises(ValueError, match=said):
            select(AnnotateJob(str(model_dir)), str(pool), 2, out, strategy="entropy")
    single = subprocess.run(
        [
            sys.executable,
            "-m",
            "spacy_cner",
            "select",
            str(model_dir),
            str(pool / "a.txt"),
            "-n",
            "2",
            "-o",
            str(pool / "a.txt"),
            "-q",
        ],
        capture_output=True,
        text=True,
    )
    assert single.returncode == 1 and "is one of the input files" in " ".join(single.stdout.split())
    assert "Traceback" not in single.stderr
    assert {p: p.read_bytes() for p in pool.iterdir()} == before
    scores = tmp_path / "next.jsonl.scores"
    scores.mkdir()
    (scores / "notes.md").write_text("mine", encoding="utf8")
    with pytest.raises(ValueError, match="holds files annotate did not write"):
        select(AnnotateJob(str(model_dir)), str(pool), 2, tmp_path / "next.jsonl", strategy="entropy")
    assert [p.name for p in scores.iterdir()] == ["notes.md"]


@pytest.mark.parametrize("first_line", ["", "   ", "null", "[]"])
def test_select_never_takes_a_users_file_for_its_own_output(model_dir, tmp_path, first_line):
    """Issue 85: an input file whose first line was blank, spaces, `null` or `[]` was taken for select's own
    output and overwritten (exit 0, none of its texts left); a user's OUT.errors.jsonl was deleted when no
    row was bad. Now only a file select wrote, unchanged since (OUT.select.json's sha256), is replaced."""
    pool = tmp_path / "in"
    pool.mkdir()
    mine = pool / "a.txt"
    mine.write_text(first_line + "\n" + "\n".join(TEXTS) + "\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"output .*a\.txt is one of the input files"):
        select(AnnotateJob(str(model_dir)), str(pool), 3, mine, strategy="entropy")
    with pytest.raises(ValueError, match=r"output .*a\.txt is one of the input files \(the input itself\)"):
        select(AnnotateJob(str(model_dir)), str(mine), 3, mine, strategy="entropy")
    assert mine.read_text(encoding="utf8") == first_line + "\n" + "\n".join(TEXTS) + "\n"
    assert sorted(p.name for p in pool.iterdir()) == ["a.txt"]
    # A user's own files named as the output or errors file, outside the input: refused, kept.
    out = tmp_path / "next.jsonl"
    for path in (out, tmp_path / "next.jsonl.errors.jsonl"):
        path.write_text(first_line + "\n", encoding="utf8")
        with pytest.raises(ValueError, match=r"exists and select did not write it"):
            select(AnnotateJob(str(model_dir)), str(pool), 3, out, strategy="entropy")
        assert path.read_text(encoding="utf8") == first_line + "\n"
        path.unlink()
    # Select's own output is replaced by a rerun (no row is bad: its errors file goes); once edited, kept.
    (tmp_path / "next.jsonl.errors.jsonl").write_text("{}\n", encoding="utf8")
    with pytest.raises(ValueError, match="exists and select did not write it"):
        select(AnnotateJob(str(model_dir)), str(pool), 3, out, strategy="entropy")
    (tmp_path / "next.jsonl.errors.jsonl").unlink()
    select(AnnotateJob(str(model_dir)), str(pool), 3, out, strategy="entropy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "next.jsonl", "next.jsonl.select.json"]
    select(AnnotateJob(str(model_dir)), str(pool), 2, out, strategy="entropy")
    assert len(out.read_text(encoding="utf8").splitlines()) == 2
    out.write_text(out.read_text(encoding="utf8") + "\n", encoding="utf8")  # the user's edit
    with pytest.raises(ValueError, match="or it changed since"):
        select(AnnotateJob(str(model_dir)), str(pool), 3, out, strategy="entropy")
    assert out.read_text(encoding="utf8").endswith("\n\n")
    (tmp_path / "next.jsonl.select.json").write_text("[]", encoding="utf8")  # not select's record
    with pytest.raises(ValueError, match="is not select's record of the files it wrote"):
        select(AnnotateJob(str(model_dir)), str(pool), 3, tmp_path / "next.jsonl", strategy="entropy")
    assert (tmp_path / "next.jsonl.select.json").read_text(encoding="utf8") == "[]"


def test_select_keeps_its_output_if_killed_while_writing_it(model_dir, tmp_path, monkeypatch):
    """The record names the new content before the file is written: a run killed in between leaves a
    file the next run may replace (old or new content)."""
    source = tmp_path / "pool.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf8")
    out = tmp_path / "next.jsonl"
    select(AnnotateJob(str(model_dir)), str(source), 3, out, strategy="entropy")

    def killed(self, data):
        raise KeyboardInterrupt

    monkeypatch.setattr("pathlib.Path.write_bytes", killed)
    with pytest.raises(KeyboardInterrupt):
        select(AnnotateJob(str(model_dir)), str(source), 2, out, strategy="entropy")
    monkeypatch.undo()
    select(AnnotateJob(str(model_dir)), str(source), 2, out, strategy="entropy")
    assert len(out.read_text(encoding="utf8").splitlines()) == 2


def test_select_reads_the_text_column_it_is_given(model_dir, tmp_path):
    source = tmp_path / "pool.jsonl"
    source.write_text(
        "".join(json.dumps({"id": i, "content": t}, ensure_ascii=False) + "\n" for i, t in enumerate(TEXTS)),
        encoding="utf8",
    )
    out = tmp_path / "next.jsonl"
    summary = select(AnnotateJob(str(model_dir), text_field="content"), str(source), 3, out, strategy="entropy")
    assert (summary.texts, summary.errors, summary.selected) == (6, 0, 3)
    records = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
    assert all(TEXTS[r["id"]] == r["content"] and "text" not in r for r in records)
    plain = select(AnnotateJob(str(model_dir)), str(source), 3, tmp_path / "plain.jsonl", strategy="entropy")
    assert (plain.texts, plain.errors) == (0, 6)  # no "text" field: each row an error, none dropped


def test_select_shows_annotate_progress_bar_with_a_total(model_dir, tmp_path, monkeypatch):
    import tqdm

    bars = []

    class Recorder(tqdm.tqdm):
        def close(self):
            if not getattr(self, "recorded", False):
                self.recorded = True
                bars.append((self.total, self.n))
            super().close()

    monkeypatch.setattr(tqdm, "tqdm", Recorder)
    source = tmp_path / "pool.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf8")
    select(
        AnnotateJob(str(model_dir)),
        str(source),
        2,
        tmp_path / "next.jsonl",
        strategy="entropy",
        progress=True,
        shard_size=2,
    )
    assert bars == [(6, 6)]


def test_select_command(model_dir, tmp_path):
    source = tmp_path / "pool.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf8")
    out = tmp_path / "next.jsonl"
    args = [
        sys.executable,
        "-m",
        "spacy_cner",
        "select",
        str(model_dir),
        str(source),
        "-n",
        "3",
        "-o",
        str(out),
        "--strategy",
        "least-confident",
        "--format",
        "prodigy",
        "-q",
    ]
    result = subprocess.run(args, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "3 of 6 texts selected (least-confident)" in result.stdout
    assert all("spans" in json.loads(line) for line in out.read_text(encoding="utf8").splitlines())
    explored = subprocess.run(args + ["--explore", "0.34"], capture_output=True, text=True)
    assert explored.returncode == 0 and "3 of 6 texts selected (least-confident, 1 drawn at random)" in explored.stdout
    assert [bool(json.loads(line)["meta"].get("explore")) for line in out.read_text("utf8").splitlines()] == [
        False,
        False,
        True,
    ]
    drawn = subprocess.run(args + ["--power", "1"], capture_output=True, text=True)
    assert drawn.returncode == 0 and "proportional to score ** 1)" in drawn.stdout
    dense = subprocess.run(args + ["--density", "1"], capture_output=True, text=True)
    assert dense.returncode == 0 and "ranked by score * typicality ** 1)" in " ".join(dense.stdout.split())
    both = subprocess.run(args + ["--power", "1", "--explore", "0.34"], capture_output=True, text=True)
    assert both.returncode == 1 and "without explore" in both.stdout and "Traceback" not in both.stderr
    short = subprocess.run(args[:7] + ["10"] + args[8:], capture_output=True, text=True)
    assert short.returncode == 0 and "Only 6 of the 10 texts asked for" in " ".join(short.stdout.split())
    bad = subprocess.run(
        args[:4] + [str(tmp_path / "missing"), str(source), "-n", "3", "-o", str(out)], capture_output=True, text=True
    )
    assert bad.returncode == 1 and "Cannot load the pipeline" in bad.stdout and "Traceback" not in bad.stderr


def test_select_resumes_from_the_shards_scored_and_starts_afresh_on_other_settings(model_dir, tmp_path, monkeypatch):
    """Scores go to OUTPUT.scores/ shard by shard (annotate's resumable shards): a run killed after
    scoring (here: while writing the selection) and started again rescores nothing; a lost shard is
    rescored alone; another strategy starts the folder afresh; success removes the folder."""
    import spacy_cner.annotate.select as select_module

    source = tmp_path / "pool.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf8")
    fresh = tmp_path / "fresh.jsonl"
    select(AnnotateJob(str(model_dir)), str(source), 4, fresh, strategy="entropy")
    assert not (tmp_path / "fresh.jsonl.scores").exists()
    out = tmp_path / "next.jsonl"

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(select_module, "selection_text", killed)
        with pytest.raises(KeyboardInterrupt):
            select(AnnotateJob(str(model_dir)), str(source), 4, out, strategy="entropy", shard_size=2)
    work = tmp_path / "next.jsonl.scores"
    shards = sorted(work.glob("pool.*.jsonl"))
    assert len(shards) == 3 and not out.exists()
    summary = select(AnnotateJob(str(model_dir)), str(source), 4, out, strategy="entropy", shard_size=2)
    assert summary.characters == 0 and summary.texts == len(TEXTS)  # read back, not rescored
    assert out.read_text(encoding="utf8") == fresh.read_text(encoding="utf8")
    with monkeypatch.context() as patch:
        patch.setattr(select_module, "selection_text", killed)
        with pytest.raises(KeyboardInterrupt):
            select(AnnotateJob(str(model_dir)), str(source), 4, out, strategy="entropy", shard_size=2)
    shards[1].unlink()
    for marker in (work / ".annotate" / "done").glob("*.json"):
        marker.unlink()
    summary = select(AnnotateJob(str(model_dir)), str(source), 4, out, strategy="entropy", shard_size=2)
    assert summary.characters == len(TEXTS[2]) + len(TEXTS[3])
    assert out.read_text(encoding="utf8") == fresh.read_text(encoding="utf8")
    with monkeypatch.context() as patch:
        patch.setattr(select_module, "selection_text", killed)
        with pytest.raises(KeyboardInterrupt):
            select(AnnotateJob(str(model_dir)), str(source), 4, out, strategy="entropy", shard_size=2)
    summary = select(AnnotateJob(str(model_dir)), str(source), 4, out, strategy="expected-count", shard_size=2)
    assert summary.characters == sum(map(len, TEXTS))  # scored again: another strategy
    records = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
    assert {r["select"]["strategy"] for r in records} == {"expected-count"}
    assert not work.exists()


def test_select_scores_are_the_same_with_worker_processes(model_dir, tmp_path):
    source = tmp_path / "pool.txt"
    source.write_text("\n".join(TEXTS * 3) + "\n", encoding="utf8")
    outs = []
    for n_process in (1, 2):
        out = tmp_path / f"next{n_process}.jsonl"
        select(
            AnnotateJob(str(model_dir), n_process=n_process, batch_size=4),
            str(source),
            5,
            out,
            strategy="entropy",
            diversity=None,
        )
        outs.append([json.loads(line) for line in out.read_text(encoding="utf8").splitlines()])
    assert [r["select"]["source"] for r in outs[0]] == [r["select"]["source"] for r in outs[1]]
    assert [r["select"]["score"] for r in outs[0]] == pytest.approx([r["select"]["score"] for r in outs[1]], rel=1e-6)


def test_uncertainty_setting_is_checked_and_not_saved(model_dir, tmp_path):
    nlp = spacy.load(model_dir)
    pipe = nlp.get_pipe("crf_ner")
    with pytest.raises(ValueError, match="Unknown strategy 'entropie'"):
        pipe.uncertainty = "entropie"
    pipe.uncertainty = "entropy"
    doc = nlp("张三在上海")
    assert doc._.uncertainty > 0
    _, (score,) = score_docs(nlp, ["张三在上海"], "entropy")
    assert doc._.uncertainty == pytest.approx(score)
    nlp.to_disk(tmp_path / "saved")
    assert spacy.load(tmp_path / "saved").get_pipe("crf_ner").uncertainty is None
    assert spacy.load(tmp_path / "saved")("张三在上海")._.uncertainty is None
    pipe.spans_key = None
    with pytest.raises(ValueError, match="spans_key null"):
        pipe.uncertainty = "expected-count"
