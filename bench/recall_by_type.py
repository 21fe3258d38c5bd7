"""Recall per entity type of a model's test predictions, for entities seen and unseen in train, with
examples of the missed ones, and false positives per type.

Usage: python bench/recall_by_type.py MODEL TEST.spacy TRAIN.spacy [--examples 12] [--result NAME]

An entity is "seen" when its text and label occur as an entity in TRAIN (as bench_datasets.py's
R seen / unseen). Prints one line per (label, seen) with the hits, the test entities, the recall
and the first missed ones, then the false positives per label; saves the table as a result.
"""

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from _common import Section, add_result_argument, publish


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("test", type=Path)
    parser.add_argument("train", type=Path)
    parser.add_argument("--examples", type=int, default=12)
    add_result_argument(parser, "recall_by_type")
    args = parser.parse_args()
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.load(args.model)
    test = list(DocBin().from_disk(args.test).get_docs(nlp.vocab))
    seen = {(e.text, e.label_) for doc in DocBin().from_disk(args.train).get_docs(nlp.vocab) for e in doc.ents}
    hits = defaultdict(lambda: [0, 0])
    missed = defaultdict(list)
    false_positives = Counter()
    for gold, predicted in zip(test, nlp.pipe([doc.text for doc in test], batch_size=256)):
        found = {(e.start_char, e.end_char, e.label_) for e in predicted.ents}
        reference = {(e.start_char, e.end_char, e.label_) for e in gold.ents}
        for ent in gold.ents:
            key = (ent.label_, (ent.text, ent.label_) in seen)
            hit = (ent.start_char, ent.end_char, ent.label_) in found
            hits[key][0] += hit
            hits[key][1] += 1
            if not hit and len(missed[key]) < args.examples:
                missed[key].append(ent.text)
        false_positives.update(
            e.label_ for e in predicted.ents if (e.start_char, e.end_char, e.label_) not in reference
        )
    for (label, is_seen), (n_hit, n) in sorted(hits.items()):
        print(
            f"{label} {'seen' if is_seen else 'unseen'}: {n_hit} of {n} ({n_hit / n * 100:.1f}%); missed: "
            + ", ".join(missed[(label, is_seen)])
        )
    print("false positives:", dict(false_positives.most_common()))
    table, shown = [], set()  # a label's false positives on its first row
    for (label, is_seen), (n_hit, n) in sorted(hits.items()):
        table.append(
            {
                "label": label,
                "in train": "seen" if is_seen else "unseen",
                "found": n_hit,
                "test entities": n,
                "recall %": round(n_hit / n * 100, 1),
                "false positives": None if label in shown else false_positives[label],
            }
        )
        shown.add(label)
    recall = [
        {"label": label, "seen": is_seen, "found": n_hit, "entities": n, "missed": missed[(label, is_seen)]}
        for (label, is_seen), (n_hit, n) in sorted(hits.items())
    ]
    figures = {"recall": recall, "false_positives": dict(false_positives), "model": args.model}
    section = Section(
        "Recall per entity type, seen and unseen in train",
        "Seen: the entity's text and label occur as an entity in train.",
        [table],
    )
    publish(args.result, figures, section)


if __name__ == "__main__":
    main()
