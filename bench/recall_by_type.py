"""Recall per entity type of a model's test predictions, for entities seen and unseen in train, with
examples of the missed ones, and false positives per type.

Usage: python bench/recall_by_type.py MODEL TEST.spacy TRAIN.spacy
"""
import sys, spacy, collections
from spacy.tokens import DocBin
nlp = spacy.load(sys.argv[1])
test = list(DocBin().from_disk(sys.argv[2]).get_docs(nlp.vocab))
train = DocBin().from_disk(sys.argv[3]).get_docs(nlp.vocab)
seen = {(e.text, e.label_) for d in train for e in d.ents}
pred = list(nlp.pipe([d.text for d in test], batch_size=256))
stats = collections.defaultdict(lambda: [0, 0]); fp = collections.Counter(); examples = collections.defaultdict(list)
for g, p in zip(test, pred):
    found = {(e.start_char, e.end_char, e.label_) for e in p.ents}
    gold = {(e.start_char, e.end_char, e.label_) for e in g.ents}
    for e in g.ents:
        k = (e.label_, (e.text, e.label_) in seen)
        hit = (e.start_char, e.end_char, e.label_) in found
        stats[k][0] += hit; stats[k][1] += 1
        if not hit and len(examples[k]) < 12: examples[k].append(e.text)
    for e in p.ents:
        if (e.start_char, e.end_char, e.label_) not in gold: fp[e.label_] += 1
for k in sorted(stats): print(k, stats[k], round(stats[k][0] / stats[k][1] * 100, 1), examples[k])
print("false positives", fp)
