"""Robustness metrics on hand-made predictions: S/P/R-F1, Asr and the changed entities."""

import pytest
import spacy
from spacy.training import Example

from spacy_cner.robustness.metrics import evaluate_robustness, make_pairs, score_robustness

TEXTS = ["深圳特区成立", "张三来了", "李四"]
GOLD = [[(0, 4, "ORG")], [(0, 2, "PER")], [(0, 2, "PER")]]
ALONE = [[(0, 4, "GPE")], [(0, 2, "PER")], [(0, 2, "PER")]]


def joined_alone(pairs):
    """What a context-blind model predicts for each joined sample."""
    out = []
    for i, j in pairs:
        offset = len(TEXTS[i])
        out.append(ALONE[i] + [(s + offset, e + offset, label) for s, e, label in ALONE[j]])
    return out


def test_pairings():
    assert make_pairs(4) == [(0, 1), (1, 2), (2, 3)]
    assert make_pairs(5, "disjoint") == [(0, 1), (2, 3)]
    random_pairs = make_pairs(6, "random", seed=3)
    assert [i for i, _ in random_pairs] == list(range(6))
    assert all(i != j and 0 <= j < 6 for i, j in random_pairs)
    assert random_pairs == make_pairs(6, "random", seed=3)
    assert make_pairs(1) == [] and make_pairs(1, "random") == []
    with pytest.raises(ValueError, match="Unknown pairing 'shuffle'"):
        make_pairs(3, "shuffle")


def test_r_f1_is_100_when_nothing_moves():
    pairs = make_pairs(len(TEXTS))
    scores = score_robustness(TEXTS, GOLD, ALONE, pairs, joined_alone(pairs))
    assert scores.robust.f == 1.0
    assert scores.attack_success_rate == 0.0 and not scores.changed
    # S-F1: 2 of 3 sentences right (GPE is wrong); P-F1 the same over the joined samples.
    assert scores.standard.p == pytest.approx(2 / 3) and scores.standard.r == pytest.approx(2 / 3)
    assert scores.perturbed.tp == 3 and scores.perturbed.n_reference == 4
    assert scores.n_chars == (6 + 4) + (4 + 2)


def test_asr_counts_exactly_the_changed_characters():
    pairs = [(0, 1)]
    # In context: GPE -> ORG on 4 characters, and PER shrinks from 2 characters to 1.
    in_context = [[(0, 4, "ORG"), (6, 7, "PER")]]
    scores = score_robustness(TEXTS, GOLD, ALONE, pairs, in_context)
    assert scores.n_chars == 10
    assert scores.n_changed_chars == 4 + 2  # S-PER vs B-PER, O vs E-PER
    assert scores.attack_success_rate == pytest.approx(0.6)
    assert scores.robust.tp == 0 and scores.robust.n_predicted == 2 and scores.robust.n_reference == 2
    # P-F1 improved: ORG is the gold label of 深圳特区.
    assert scores.perturbed.tp == 1
    changed = [(c.sentence, c.start, c.end, c.text, c.before, c.after) for c in scores.changed]
    assert changed == [
        (0, 0, 4, "深圳特区", "GPE", "ORG"),
        (1, 0, 1, "张", None, "PER"),
        (1, 0, 2, "张三", "PER", None),
    ]
    per_type = scores.to_dict()["per_type"]
    assert per_type["ORG"]["perturbed"]["f"] == 1.0
    assert per_type["GPE"]["robust"]["r"] == 0.0


def test_mismatched_inputs_raise():
    with pytest.raises(ValueError, match="2 pairs but 1 predictions"):
        score_robustness(TEXTS, GOLD, ALONE, [(0, 1), (1, 2)], [[]])


def test_evaluate_a_context_blind_pipeline():
    """An entity ruler cannot be moved by context: R-F1 100, Asr 0; S-F1 from its patterns."""
    nlp = spacy.blank("zh")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "GPE", "pattern": "深圳特区"}, {"label": "PER", "pattern": "张三"}])
    gold_docs = [Example.from_dict(nlp.make_doc(t), {"entities": e}).reference for t, e in zip(TEXTS, GOLD)]
    scores = evaluate_robustness(nlp, gold_docs)
    assert scores.robust.f == 1.0 and scores.attack_success_rate == 0.0
    assert scores.standard.tp == 1 and scores.standard.n_predicted == 2 and scores.standard.n_reference == 3
    assert scores.to_dict()["ents_f"] == pytest.approx(scores.standard.f)


def test_progress_shows_one_bar_at_a_time(capsys):
    """The two bars (sentences alone, joined pairs) were open at once and redrew each other with cursor
    movements, escape codes in a log file: now each closes before the next opens."""
    from tqdm import tqdm

    tqdm._instances.clear()  # a bar another test left open would give these a position, and cursor movements
    nlp = spacy.blank("zh")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "PER", "pattern": "张三"}])
    gold_docs = [Example.from_dict(nlp.make_doc(t), {"entities": e}).reference for t, e in zip(TEXTS, GOLD)]
    evaluate_robustness(nlp, gold_docs, progress=True)
    err = capsys.readouterr().err
    assert "sentences alone: 100%" in err and "joined pairs: 100%" in err
    assert "\x1b[" not in err  # no cursor movement
    assert err.index("joined pairs") > err.rindex("sentences alone")


def test_report_shows_n_a_for_a_label_the_model_never_predicts():
    """R-F1 compares the model with itself: a label it never predicts has none (metrics.json leaves it
    out), and the report says n/a rather than drawing 0.00."""
    from spacy_cner.robustness.metrics import score_robustness
    from spacy_cner.robustness.report import render_report

    texts = ["张三来了", "阿里巴巴"]
    gold = [[(0, 2, "PER")], [(0, 4, "ORG")]]
    alone = [[(0, 2, "PER")], []]  # ORG is never predicted
    pairs = [(0, 1)]
    in_context = [[(0, 2, "PER")]]
    scores = score_robustness(texts, gold, alone, pairs, in_context)
    assert "robust" not in scores.to_dict()["per_type"]["ORG"]
    page = render_report(scores, "test")
    assert "R-F1 n/a" in page and "ORG R-F1 0.00" not in page
    assert "PER R-F1 100.00" in page
