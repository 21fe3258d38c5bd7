"""Sentence-level robustness (Wang, Wang and Shen, CCL 2024): does a neighbour sentence change the answer?

Each sample of the perturbed set joins two test sentences, X_i + X_j. Metrics
(paper section 3.3), entity-level micro P/R/F1 as spaCy's scorer computes them:
- S-F1: predictions on the original sentences against gold;
- P-F1: predictions on the joined samples against gold (offsets shifted);
- R-F1: predictions on the joined samples against the model's own predictions on
  the separate sentences: 100 when context never changes an answer;
- Asr (eq. 2): the share of characters of the joined samples whose predicted tag
  (B/I/E/S/O and label) differs from the one predicted for the sentence alone.
"""

import random
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from spacy.language import Language
from spacy.scorer import PRFScore, get_ner_prf
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry
from tqdm import tqdm

from ..tags import Entity, spans_to_tags

PAIRINGS = ("adjacent", "disjoint", "random")


def evaluate_robustness(
    nlp: Language,
    gold_docs: Sequence[Doc],
    pairing: str = "adjacent",
    seed: int = 0,
    batch_size: int = 256,
    progress: bool = False,
) -> "RobustnessScores":
    """Run a pipeline on the test sentences alone and joined, and score its robustness.

    nlp (Language): The pipeline; it sees raw texts, as in deployment.
    gold_docs (Sequence[Doc]): The test sentences in file order, with gold entities.
    pairing (str): See make_pairs.
    seed (int): Seed of the random pairing.
    batch_size (int): Texts per nlp.pipe batch.
    progress (bool): Show progress bars (on stderr).
    RETURNS (RobustnessScores): The scores; .inputs holds what was scored.
    """
    unannotated = [i for i, doc in enumerate(gold_docs) if len(doc) and not doc.has_annotation("ENT_IOB")]
    if unannotated:
        shown = ", ".join(str(i) for i in unannotated[:10]) + (", ..." if len(unannotated) > 10 else "")
        raise ValueError(
            f"{len(unannotated)} of the {len(gold_docs)} test docs have no entity annotation (missing, "
            f'not O: e.g. a CLUENER test file without "label"): docs {shown}. The scores compare '
            f"predictions with gold entities: use an annotated split (such as dev)."
        )
    texts = [doc.text for doc in gold_docs]
    gold = [_entities(doc) for doc in gold_docs]
    pairs = make_pairs(len(texts), pairing, seed)
    joined = [texts[i] + texts[j] for i, j in pairs]
    docs_alone = nlp.pipe(texts, batch_size=batch_size)
    docs_joined = nlp.pipe(joined, batch_size=batch_size)
    if progress:
        # One bar at a time, each closed before the next opens: two open bars redraw each other with
        # cursor movements that a log file keeps as escape codes.
        docs_alone = tqdm(docs_alone, total=len(texts), desc="sentences alone", unit="sent")
    alone = [_entities(doc) for doc in docs_alone]
    if progress:
        docs_alone.close()
        docs_joined = tqdm(docs_joined, total=len(joined), desc="joined pairs", unit="pair")
    in_context = [_entities(doc) for doc in docs_joined]
    if progress:
        docs_joined.close()
    scores = score_robustness(texts, gold, alone, pairs, in_context)
    scores.inputs = {"texts": texts, "gold": gold, "alone": alone, "pairs": pairs, "in_context": in_context}
    return scores


@registry.scorers("spacy-cner.robust_ner_scorer.v1")
def make_robust_ner_scorer(pairing: str = "adjacent", seed: int = 0, batch_size: int = 64) -> "RobustNERScorer":
    """spaCy's NER scores plus R-F1 and friends on the joined dev sentences.

    For crf_ner's `scorer` setting: the dev scores gain ents_robust_p/r/f (R-F1),
    ents_robust_per_type, ents_perturbed_p/r/f (P-F1) and ents_asr, so that
    [training.score_weights] can select models for robustness. Scoring runs the
    pipeline once more on the joined pairs (about twice the dev text again).

    pairing (str): See make_pairs; "adjacent" joins dev docs i and i + 1 in file order.
    seed (int): Seed of the random pairing.
    batch_size (int): Joined texts per nlp.pipe batch.
    """
    make_pairs(2, pairing, seed)  # fail on an unknown pairing at config time
    return RobustNERScorer(pairing, seed, batch_size)


class PipelineLink:
    """The pipeline a pipe was created or initialized in, for a scorer that runs it
    (robustness.PipelineScorer): spaCy's Scorer gives component scorers no pipeline.

    Held weakly (the pipeline owns the pipe). A pickled or copied pipe is in no pipeline
    yet, and a weak reference cannot be pickled: the link pickles empty.
    """

    def __init__(self, nlp: Optional[Language] = None) -> None:
        self._ref = weakref.ref(nlp) if nlp is not None else None

    def __call__(self) -> Optional[Language]:
        return self._ref() if self._ref is not None else None

    def __reduce__(self):
        return (PipelineLink, ())

    @staticmethod
    def pipeline_of(pipe: Any, link: Optional["PipelineLink"]) -> Language:
        """The pipeline the link holds, if the pipe is in it; else a ValueError saying what to do."""
        nlp = link() if link is not None else None
        if nlp is None or not any(p is pipe for _, p in nlp.pipeline):
            raise ValueError(
                f"The scorer of '{pipe.name}' runs the pipeline, but '{pipe.name}' is not in the pipeline "
                "it was created or initialized in (a sourced or copied component?). Initialize it "
                "in its pipeline, or use spacy.ner_scorer.v1."
            )
        return nlp


class PipelineScorer:
    """A component scorer that runs the pipeline: crf_ner calls it with nlp=<its pipeline>
    (spaCy gives component scorers no pipeline). Subclass it to write one."""

    def __call__(self, examples: Iterable[Example], *, nlp: Optional[Language] = None, **kwargs) -> Dict[str, Any]:
        raise NotImplementedError


class RobustNERScorer(PipelineScorer):
    """A scorer that runs the pipeline on joined examples; see make_robust_ner_scorer."""

    def __init__(self, pairing: str, seed: int, batch_size: int) -> None:
        self.pairing = pairing
        self.seed = seed
        self.batch_size = batch_size

    def __call__(self, examples: Iterable[Example], *, nlp: Optional[Language] = None, **kwargs) -> Dict[str, Any]:
        examples = list(examples)
        scores = get_ner_prf(examples, **kwargs)
        if nlp is None:
            raise ValueError(
                "spacy-cner.robust_ner_scorer.v1 needs the pipeline to run on joined examples; it is "
                "called by crf_ner with nlp=..., as the `scorer` of a crf_ner component."
            )
        texts = [eg.reference.text for eg in examples]
        gold = [_entities(eg.reference) for eg in examples]
        alone = [_entities(eg.predicted) for eg in examples]
        pairs = make_pairs(len(texts), self.pairing, self.seed)
        joined = (texts[i] + texts[j] for i, j in pairs)
        in_context = [_entities(doc) for doc in nlp.pipe(joined, batch_size=self.batch_size)]
        robustness = score_robustness(texts, gold, alone, pairs, in_context)
        for name, prf in (("robust", robustness.robust), ("perturbed", robustness.perturbed)):
            scores.update({f"ents_{name}_{key}": value for key, value in prf.to_dict().items()})
        scores["ents_robust_per_type"] = {
            label: metrics["robust"].to_dict()
            for label, metrics in sorted(robustness.per_type.items())
            if "robust" in metrics
        }
        scores["ents_asr"] = robustness.attack_success_rate
        return scores


def make_pairs(n_sentences: int, pairing: str = "adjacent", seed: int = 0) -> List[Tuple[int, int]]:
    """Which sentences are joined, in test-file order.

    pairing (str): "adjacent": (i, i + 1) for every i, overlapping (the paper's);
        "disjoint": (0, 1), (2, 3), ...; an odd last sentence joins none;
        "random": each sentence i with a random other sentence, chosen with `seed`.
    RETURNS (List[Tuple[int, int]]): (first, second) sentence indices per sample.
    """
    if pairing == "adjacent":
        return [(i, i + 1) for i in range(n_sentences - 1)]
    if pairing == "disjoint":
        return [(i, i + 1) for i in range(0, n_sentences - 1, 2)]
    if pairing == "random":
        if n_sentences < 2:
            return []
        rng = random.Random(seed)
        pairs = []
        for i in range(n_sentences):
            j = rng.randrange(n_sentences - 1)
            pairs.append((i, j if j < i else j + 1))
        return pairs
    raise ValueError(f"Unknown pairing {pairing!r}: use one of {', '.join(PAIRINGS)}.")


def join_entities(first: Sequence[Entity], second: Sequence[Entity], offset: int) -> List[Entity]:
    """The entities of X_i + X_j: the second sentence's shifted by len(X_i) characters."""
    return list(first) + [(start + offset, end + offset, label) for start, end, label in second]


class PRF(PRFScore):
    """spaCy's PRFScore (micro counts of sets of entities), with the counts and short names the
    robustness metrics and report use."""

    def add(self, predicted: Set[Entity], reference: Set[Entity]) -> None:
        self.score_set(predicted, reference)

    @property
    def n_predicted(self) -> int:
        return self.tp + self.fp

    @property
    def n_reference(self) -> int:
        return self.tp + self.fn

    @property
    def p(self) -> float:
        return self.precision

    @property
    def r(self) -> float:
        return self.recall

    @property
    def f(self) -> float:
        return self.fscore


@dataclass
class ChangedEntity:
    """An entity the context made appear, disappear or change label."""

    sample: int  # index into the pairs
    sentence: int  # index of the test sentence it is in
    start: int  # character offsets in that sentence
    end: int
    text: str
    before: Optional[str]  # label predicted for the sentence alone (None: no entity)
    after: Optional[str]  # label predicted in context

    def to_dict(self) -> Dict[str, object]:
        return dict(self.__dict__)


@dataclass
class RobustnessScores:
    """S-F1, P-F1, R-F1 and Asr, overall and per entity type, and what changed."""

    standard: PRF = field(default_factory=PRF)
    perturbed: PRF = field(default_factory=PRF)
    robust: PRF = field(default_factory=PRF)
    per_type: Dict[str, Dict[str, PRF]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(PRF)))
    n_chars: int = 0
    n_changed_chars: int = 0
    changed: List[ChangedEntity] = field(default_factory=list)
    # What was scored (texts, gold, alone, pairs, in_context), for reports.
    inputs: Dict[str, list] = field(default_factory=dict)

    @property
    def attack_success_rate(self) -> float:
        """Asr (eq. 2): changed characters / characters of the joined samples."""
        return self.n_changed_chars / self.n_chars if self.n_chars else 0.0

    def to_dict(self) -> Dict[str, object]:
        return {
            "ents_f": self.standard.f,
            "standard": self.standard.to_dict(),
            "perturbed": self.perturbed.to_dict(),
            "robust": self.robust.to_dict(),
            "attack_success_rate": self.attack_success_rate,
            "n_chars": self.n_chars,
            "n_changed_chars": self.n_changed_chars,
            "per_type": {
                label: {name: prf.to_dict() for name, prf in metrics.items()}
                for label, metrics in sorted(self.per_type.items())
            },
            "changed": [entity.to_dict() for entity in self.changed],
        }


def score_robustness(
    texts: Sequence[str],
    gold: Sequence[Sequence[Entity]],
    alone: Sequence[Sequence[Entity]],
    pairs: Sequence[Tuple[int, int]],
    in_context: Sequence[Sequence[Entity]],
) -> RobustnessScores:
    """The robustness metrics from predictions (character offsets throughout).

    texts: the test sentences; gold: their gold entities; alone: the model's
    entities for each sentence on its own; pairs: the joined samples (make_pairs);
    in_context: the model's entities for each joined text texts[i] + texts[j].
    RETURNS (RobustnessScores): The scores and the list of changed entities.
    """
    if not (len(texts) == len(gold) == len(alone)):
        raise ValueError(f"Got {len(texts)} texts, {len(gold)} gold and {len(alone)} predicted entity lists.")
    if len(pairs) != len(in_context):
        raise ValueError(f"Got {len(pairs)} pairs but {len(in_context)} predictions in context.")
    scores = RobustnessScores()
    for i in range(len(texts)):
        _add(scores, "standard", set(alone[i]), set(gold[i]))
    for sample, ((i, j), predicted) in enumerate(zip(pairs, in_context)):
        offset = len(texts[i])
        predicted = set(predicted)
        _add(scores, "perturbed", predicted, set(join_entities(gold[i], gold[j], offset)))
        expected = set(join_entities(alone[i], alone[j], offset))
        _add(scores, "robust", predicted, expected)
        length = offset + len(texts[j])
        before_tags, after_tags = spans_to_tags(expected, length, "BIOES"), spans_to_tags(predicted, length, "BIOES")
        scores.n_chars += length
        scores.n_changed_chars += sum(a != b for a, b in zip(before_tags, after_tags))
        text = texts[i] + texts[j]
        for start, end, before, after in _differences(expected, predicted):
            sentence, shift = (i, 0) if start < offset else (j, offset)
            scores.changed.append(
                ChangedEntity(sample, sentence, start - shift, end - shift, text[start:end], before, after)
            )
    return scores


def _entities(doc: Doc) -> List[Entity]:
    return [(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents]


def _add(scores: RobustnessScores, name: str, predicted: Set[Entity], reference: Set[Entity]) -> None:
    getattr(scores, name).add(predicted, reference)
    for label in {e[2] for e in predicted} | {e[2] for e in reference}:
        scores.per_type[label][name].add(
            {e for e in predicted if e[2] == label}, {e for e in reference if e[2] == label}
        )


def _differences(before: Set[Entity], after: Set[Entity]) -> List[Tuple[int, int, Optional[str], Optional[str]]]:
    """(start, end, label before, label after) for each span whose entity changed.

    A span predicted with another label counts once, as a relabelling; a span
    only in one of the two sets appeared or disappeared.
    """
    before_labels = {(s, e): label for s, e, label in before}
    after_labels = {(s, e): label for s, e, label in after}
    changed = []
    for span in sorted(set(before_labels) | set(after_labels)):
        old, new = before_labels.get(span), after_labels.get(span)
        if old != new:
            changed.append((span[0], span[1], old, new))
    return changed
