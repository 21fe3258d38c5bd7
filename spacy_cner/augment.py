"""Mention replacement, for NER on small data (crf_ner's replace_mentions).

A model trained on a few thousand sentences recognises the entities it has seen far better than
new ones (People's Daily, 2,318 train sentences: recall 92% on test entities seen in train, 46%
on the others; BENCHMARKS.md): it learns the names more than the contexts. Mention replacement
(Dai and Adel 2020, "An analysis of simple data augmentation for named entity recognition")
swaps an entity for another mention of the same label from the training data, so a context is
seen with many names.

Why not a spaCy augmenter ([corpora.train.augmenter]): spaCy's loop reads the train corpus once
when max_epochs >= 0 (create_train_batches), so an augmenter draws its replacements once for the
whole training, and each replaced entity's own name is never seen again. In the pipe's update,
as join_examples, the draws are fresh at every step and the examples stay as many.
"""
import random
from typing import Dict, Iterable, List, Optional, Set, Tuple

import numpy
from spacy.attrs import ORTH, SPACY
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

    def replace(self, examples: List[Example], level: float) -> List[Example]:
        """Each example with each entity replaced, with probability level, by another mention of
        its label drawn uniformly (Python's `random`, seeded by spaCy's training); the rest of
        the doc and its sentence starts are kept. Left as they are: examples whose predicted and
        reference tokens differ, whose predicted doc holds annotation (pre-set entities, tags)
        or whose reference has missing entity annotation, other token annotation or span groups.
        """
        return [self._replace_one(eg, level) for eg in examples]

    def _replace_one(self, eg: Example, level: float) -> Example:
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
            if len(choices) > 1 and random.random() < level:
                new_words, new_spaces = choice = random.choice(choices)
                while choice == mention:
                    new_words, new_spaces = choice = random.choice(choices)
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
        new_reference = Doc(reference.vocab, words=words, spaces=spaces, ents=tags, sent_starts=starts if has_starts else None)
        return Example(Doc(predicted.vocab, words=words, spaces=spaces), new_reference)


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
