"""Training-time augmentation in crf_ner's update: mention replacement (replace_mentions), for NER on
small data, and joined pairs of examples (join_examples), for sentence-level robustness.

A model trained on a few thousand sentences recognises the entities it has seen far better than
new ones (recall on test entities seen in train against the others: BENCHMARKS.md#datasets, "R seen /
unseen"): it learns the names more than the contexts. Mention replacement
(Dai and Adel 2020, "An analysis of simple data augmentation for named entity recognition")
swaps an entity for another mention of the same label from the training data, so a context is
seen with many names.

Why not a spaCy augmenter ([corpora.train.augmenter]): spaCy's loop reads the train corpus once
when max_epochs >= 0 (create_train_batches), so an augmenter draws its replacements once for the
whole training, and each replaced entity's own name is never seen again. In the pipe's update,
as join_examples, the draws are fresh at every step and the examples stay as many.
"""

import random
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy
from spacy.attrs import ORTH, SENT_START, SPACY
from spacy.tokens import Doc
from spacy.training import Example

# A mention's tokens: (words, spaces), its last space False (the one after belongs to the doc).
Mention = Tuple[Tuple[str, ...], Tuple[bool, ...]]
# Token annotation a replaced mention could not carry: such examples are left as they are.
OTHER_ANNOTATION = ("TAG", "POS", "MORPH", "LEMMA", "DEP")


class MentionPool:
    """The distinct entity mentions of each label seen in training examples."""

    def __init__(self) -> None:
        self._found: Dict[str, Set[Mention]] = {}
        self._choices: Dict[str, List[Mention]] = {}

    def __len__(self) -> int:
        return sum(len(found) for found in self._found.values())

    def add(self, examples: Iterable[Example]) -> None:
        """Add the gold entities of the examples."""
        for eg in examples:
            for ent in eg.reference.ents:
                found = self._found.setdefault(ent.label_, set())
                mention = _mention(ent)
                if mention not in found:
                    found.add(mention)
                    self._choices.pop(ent.label_, None)

    def choices(self, label: str) -> List[Mention]:
        """The label's mentions, in a fixed order (so that a seeded `random` draws the same)."""
        if label not in self._choices:
            self._choices[label] = sorted(self._found.get(label, ()))
        return self._choices[label]

    def replace(self, examples: List[Example], level: float, rng: Any = random) -> List[Example]:
        """Each example with each entity replaced, with probability level, by another mention of
        its label drawn uniformly (by rng: Python's `random` by default, seeded by spaCy's training;
        a random.Random of its own for draws that must not depend on it); the rest of
        the doc and its sentence starts are kept. Left as they are: examples whose predicted and
        reference tokens differ, whose predicted doc holds annotation (pre-set entities, tags)
        or whose reference has missing entity annotation, other token annotation or span groups.
        """
        return [self._replace_one(eg, level, rng) for eg in examples]

    def _replace_one(self, eg: Example, level: float, rng: Any) -> Example:
        reference, predicted = eg.reference, eg.predicted
        if not reference.ents or not _replaceable(eg):
            return eg
        words: List[str] = []
        spaces: List[bool] = []
        tags: List[str] = []
        starts: List[Optional[bool]] = []
        position = 0
        replaced = False
        for ent in reference.ents:
            _append(reference[position : ent.start], words, spaces, tags, starts)
            new_words, new_spaces = mention = _mention(ent)
            choices = self.choices(ent.label_)
            if len(choices) > 1 and rng.random() < level:
                new_words, new_spaces = choice = rng.choice(choices)
                while choice == mention:
                    new_words, new_spaces = choice = rng.choice(choices)
                replaced = True
            words.extend(new_words)
            spaces.extend(new_spaces[:-1] + (bool(ent[-1].whitespace_),))
            tags.extend([f"B-{ent.label_}"] + [f"I-{ent.label_}"] * (len(new_words) - 1))
            starts.extend([ent[0].is_sent_start] + [False] * (len(new_words) - 1))
            position = ent.end
        if not replaced:
            return eg
        _append(reference[position:], words, spaces, tags, starts)
        has_starts = reference.has_annotation("SENT_START")
        new_reference = Doc(
            reference.vocab, words=words, spaces=spaces, ents=tags, sent_starts=starts if has_starts else None
        )
        return Example(Doc(predicted.vocab, words=words, spaces=spaces), new_reference)


def mention_replaced_texts(docs: Sequence[Doc], copies: int, seed: int = 0, exclude: Iterable[str] = ()) -> List[str]:
    """New texts for a teacher to label (distill's augment): each doc with entities, copies times,
    with every entity replaced by another mention of its label from the docs (MentionPool, drawn by
    a random.Random(seed) of its own). Texts equal to one of the docs, to one of exclude (the dev split's:
    never train on a scored text) or to an earlier one are left out.

    Why: a student learns its teacher's function only on the texts it sees the teacher label; where
    in-domain unlabeled text is scarce, the train split's own contexts with other names are the closest
    (Dai and Adel 2020's mention replacement; for distillation, TinyBERT's augmented transfer set).

    docs (Sequence[Doc]): Docs with complete gold entities (the train split).
    copies (int): Replaced copies per doc, at least 0.
    seed (int): The draws' seed.
    exclude (Iterable[str]): Texts never to return.
    RETURNS (List[str]): The new texts, the copies of the first doc first.
    """
    if copies < 0:
        raise ValueError(f"copies must be at least 0, not {copies}.")
    examples = [
        Example(Doc(doc.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]), doc)
        for doc in docs
        if doc.ents
    ]
    pool = MentionPool()
    pool.add(examples)
    rng = random.Random(seed)
    seen = {doc.text for doc in docs} | set(exclude)
    texts = []
    for eg in examples:
        for _ in range(copies):
            text = pool.replace([eg], 1.0, rng)[0].reference.text
            if text not in seen:
                seen.add(text)
                texts.append(text)
    return texts


def _mention(ent) -> Mention:
    return tuple(t.text for t in ent), tuple(bool(t.whitespace_) for t in ent[:-1]) + (False,)


def _replaceable(eg: Example) -> bool:
    """Whether the example's docs hold nothing a replaced mention would lose."""
    reference, predicted = eg.reference, eg.predicted
    if len(reference) != len(predicted) or predicted.ents or predicted.spans or reference.spans:
        return False
    if any(doc.has_annotation(attr) for doc in (reference, predicted) for attr in OTHER_ANNOTATION):
        return False
    if predicted.has_annotation("SENT_START"):
        return False
    attrs = [ORTH, SPACY]
    if not numpy.array_equal(reference.to_array(attrs), predicted.to_array(attrs)):
        return False
    return bool((reference.to_array("ENT_IOB") != 0).all())


def _append(span, words: List[str], spaces: List[bool], tags: List[str], starts: List[Optional[bool]]) -> None:
    """Append the tokens of a span outside the entities."""
    for token in span:
        words.append(token.text)
        spaces.append(bool(token.whitespace_))
        tags.append("O")
        starts.append(token.is_sent_start)


def join_pairs(examples: List[Example], share: float) -> List[Example]:
    """Join a share of the examples in random pairs, predicted and reference docs alike.

    Training on X_i + X_j (nothing between, as spacy_cner.robustness.metrics joins test sentences)
    teaches the encoder that a neighbour's text should not change a sentence's tags; the
    pairs are drawn afresh each batch from Python's `random` (seeded by spaCy's training).

    examples (List[Example]): The batch, none empty.
    share (float): The expected share of examples joined, 0 to 1.
    RETURNS (List[Example]): The unpaired examples, then the joined pairs, in random order.
    """
    # A random rounding of share * len / 2 pairs, so small batches join at the right rate.
    n_pairs = min(len(examples) // 2, int(share * len(examples) / 2 + random.random()))
    if n_pairs == 0:
        return examples
    order = random.sample(range(len(examples)), len(examples))
    paired, rest = order[: 2 * n_pairs], order[2 * n_pairs :]
    joined = []
    for first, second in zip(paired[::2], paired[1::2]):
        pair = (examples[first], examples[second])
        predicted = join_docs([eg.predicted for eg in pair])
        reference = Doc.from_docs([eg.reference for eg in pair], ensure_whitespace=False)
        joined.append(Example(predicted, reference))
    return [examples[i] for i in rest] + joined


def join_docs(docs: Sequence[Doc]) -> Doc:
    """Doc.from_docs with nothing between, and no sentence start at a joint the docs did not set.

    For predicted docs (no parse: the SENT_START array is all there is to keep consistent).
    (Doc.from_docs marks each doc's first token as a sentence start, which a text joined
    before tokenization never has, and tags.preset_constraints would treat as an entity edge.)
    """
    joined = Doc.from_docs(list(docs), ensure_whitespace=False)
    sent_starts = [doc.to_array([SENT_START]) for doc in docs]
    for doc, starts in zip(docs, sent_starts):
        if not doc.has_annotation("SENT_START"):
            starts[0] = 0
    sent_starts[0][0] = 1
    joined.from_array([SENT_START], numpy.concatenate(sent_starts).reshape(-1, 1))
    return joined
