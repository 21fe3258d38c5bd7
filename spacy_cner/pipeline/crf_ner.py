"""The `crf_ner` pipe: named entities from a CRF over per-token emission scores."""
import hashlib
import itertools
import math
import random
import warnings
import weakref
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy
import srsly
from spacy import util
from spacy.attrs import IS_SPACE, LENGTH, SENT_START
from spacy.errors import Errors
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.pipeline.ner import ner_score
from spacy.tokens import Doc, Span, SpanGroup
from spacy.training import Corpus, Example, validate_examples, validate_get_examples
from spacy.util import registry
from spacy.vocab import Vocab
from thinc.api import Config, Linear, Model, Optimizer, set_dropout_rate
from thinc.types import Floats2d, Ints1d
from wasabi import msg

from ..adversarial import EmbeddingAttack
from ..augment import MentionPool
from ..entity_attention import example_entity_ids, gold_layers_out_of_reach, takes_gold
from ..layers._blas import training_products
from ..layers._torch import torch_module
from ..layers.char_bigram_embed import size_key_tables
from ..layers.key_embed import update_rows
from ..layers.crf import crf_decode, entity_probabilities, resize_crf
from ..layers.lexicon_adapter import adapter_lexicon, set_lexicon
from ..layers.scalar_mix import layer_weights
from ..lexicon import Lexicon
from ..long_docs import WINDOW_ATTRS, Window, doc_windows, window_doc, window_segments
from ..robustness import PipelineScorer
from ..tags import (
    TagSet,
    aligned_ner,
    gold_constraints,
    most_probable_spans,
    preset_constraints,
    tags_to_spans,
    validate_scheme,
)
from ..tokenizer import words_and_spaces

default_model_config = """
[model]
@architectures = "spacy-cner.CRFTagger.v1"
nO = null

[model.tok2vec]
@architectures = "spacy-cner.CharBigramEmbed.v1"
width = 128
embed_width = 64
char_rows = 5000
bigram_rows = 20000
prev_bigram = true
dropout = 0.1
bigram_dropout = 0.3
# Off here, on in configs/: loading a pipeline saved before the setting existed
# fills it from this default, and must not change how that pipeline reads text.
sentence_bigrams = false

[model.encoder]
@layers = "spacy-cner.BiLSTMEncoder.v1"
width = 256
depth = 1
dropout = 0.5
"""
DEFAULT_MODEL = Config().from_str(default_model_config)["model"]
# At prediction, the most tokens (summed over docs and windows) per model call: bounds the
# memory of the layers' activations on long docs and big batches.
EMISSION_BATCH_TOKENS = 16384


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


@Language.factory(
    "crf_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type"],
    default_config={
        "model": DEFAULT_MODEL,
        "scheme": "BIOES",
        "scorer": {"@scorers": "spacy.ner_scorer.v1"},
        "adversarial": None,
        "tok2vec_learn_rate_scale": 1.0,
        "long_doc_window": 512,
        "join_examples": 0.0,
        "replace_mentions": 0.0,
        "spans_key": "crf_ner",
        "candidate_threshold": 0.1,
        "ents_threshold": "fitted",
        "alignment_mode": "expand",
    },
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
)
def make_crf_ner(
    nlp: Language,
    name: str,
    model: Model,
    scheme: str,
    scorer: Optional[Callable],
    adversarial: Optional[EmbeddingAttack],
    tok2vec_learn_rate_scale: float,
    long_doc_window: int,
    join_examples: float,
    replace_mentions: float,
    spans_key: Optional[str],
    candidate_threshold: float,
    ents_threshold: Union[float, str, None],
    alignment_mode: str,
) -> "CRFEntityRecognizer":
    """Create a CRF named-entity recognizer.

    model (Model[List[Doc], List[Floats2d]]): Emission scores with a "crf" ref,
        e.g. spacy-cner.CRFTagger.v1 (which update may give (docs, gold entity ids) when its
        tok2vec or encoder has an entity_attention_scale).
    scheme (str): Tag scheme of the CRF, "BIOES" (default) or "BIO".
    scorer (Optional[Callable]): Scoring method; spaCy's NER scorer by default.
    adversarial (Optional[EmbeddingAttack]): Adversarial training on the embeddings,
        spacy-cner.fgm.v1 or spacy-cner.fgsm.v1; None trains on clean inputs only.
    tok2vec_learn_rate_scale (float): The tok2vec's (e.g. the transformer's) learning
        rate as a multiple of the optimizer's, which the layers above it use.
    long_doc_window (int): At prediction, a doc of more tokens is tagged in windows of at
        most this many tokens, cut after sentence ends (spacy_cner.long_docs.doc_windows), so
        that time and memory grow linearly with its length; 0 tags every doc whole.
    join_examples (float): In training, the share of each batch's examples that are joined
        in random pairs, X_i + X_j with nothing between (as the robustness test joins them), so
        the model learns that a neighbouring sentence does not change a sentence's entities;
        0 trains on the examples as they come.
    replace_mentions (float): In training, each gold entity's probability of being replaced,
        at each step, by another mention of its label from the training examples (mention
        replacement, Dai and Adel 2020; spacy_cner.augment), so the model learns contexts, not
        only names; 0 replaces none.
    spans_key (Optional[str]): Where to write the scored entities, doc.spans[spans_key]: the
        predicted entities and alternative spans, each with its exact probability under the
        CRF in the group's attrs["scores"] (as spancat's); None computes no probabilities.
    candidate_threshold (float): The least probability of an alternative span in the group
        (overlapping spans allowed); above 1: the predicted entities only.
    ents_threshold (Union[float, str, None]): How doc.ents are decoded. A probability: the
        spans at least that probable, most probable first, none overlapping a kept one
        (tags.most_probable_spans; below 1/2 it adds spans the best path missed, above it
        keeps the surer ones: precision for recall). "fitted" (default): the threshold fitted on
        dev at the end of training (fit_threshold, by spacy-cner.calibrate.v1 in
        [training.before_to_disk]; half the dev F1, +0.6 test F1 on average over four datasets,
        BENCHMARKS.md), the best path until one is fitted or after the weights change. None:
        the best tag sequence (Viterbi), as spaCy's `ner` does.
    alignment_mode (str): A model trained on characters tags a doc of longer tokens (a
        jieba or pkuseg pipeline) on its characters, and maps each entity onto the doc's
        tokens with Doc.char_span in this mode: "expand" (to the tokens it touches),
        "contract" (to the tokens inside it) or "strict" (only exact token boundaries).
        Entities that do not map, or overlap once mapped, are left out and counted in a warning.
    """
    pipe = CRFEntityRecognizer(
        nlp.vocab,
        model,
        name,
        scheme=scheme,
        scorer=scorer,
        adversarial=adversarial,
        tok2vec_learn_rate_scale=tok2vec_learn_rate_scale,
        long_doc_window=long_doc_window,
        join_examples=join_examples,
        replace_mentions=replace_mentions,
        spans_key=spans_key,
        candidate_threshold=candidate_threshold,
        ents_threshold=ents_threshold,
        alignment_mode=alignment_mode,
    )
    pipe.pipeline_link = PipelineLink(nlp)
    return pipe


@registry.misc("spacy-cner.calibrate.v1")
def make_calibrator(path: Optional[str], temperature: bool = True, threshold: bool = True) -> Callable[[Language], Language]:
    """A [training.before_to_disk] callback: before each save of the pipeline, every crf_ner
    pipe fits, on the examples at path (the dev corpus, e.g. ${paths.dev}), the temperature of
    its entity probabilities (fit_temperature) and then the threshold its doc.ents are decoded
    at (fit_threshold, used with ents_threshold "fitted"), both kept in its cfg. With a fitted
    threshold, the pipeline's meta["performance"] gets the entity scores on path that the saved
    pipeline has (the training log shows those of the best path, which model-best is chosen on).

    spaCy's loop saves model-last after every evaluation and copies it to model-best when its
    score is the best so far; a fit (a few passes over dev) is only kept by model-best and by
    the last save. So in a training loop the callback fits at a save whose checkpoint scores at
    least as well as every earlier one (score_weights over meta["performance"], as the loop
    ranks them) and at the final save (no evaluation since the previous call), and leaves the
    other saves of model-last as they are: the best path, the last fitted temperature. Outside
    a training loop it always fits.

    path (Optional[str]): A .spacy file or folder of them; None fits nothing.
    temperature (bool): Fit the temperature.
    threshold (bool): Fit the threshold.
    RETURNS (Callable[[Language], Language]): The callback.
    """

    checkpoints = _Checkpoints()

    def fit_before_saving(nlp: Language) -> Language:
        if path is None or not checkpoints.worth_fitting(nlp):
            return nlp
        examples = list(Corpus(path)(nlp))
        fitted = False
        for name, pipe in nlp.pipeline:
            if not isinstance(pipe, CRFEntityRecognizer) or not (temperature or threshold):
                continue
            # One decoding of dev for both fits.
            outcomes = pipe.entity_outcomes(examples)
            if temperature:
                fit = pipe.fit_temperature(examples, outcomes=outcomes)
                msg.info(
                    f"{name}: temperature {fit['temperature']:.3g} on {fit['n_entities']} predicted dev entities "
                    f"(ECE {fit['ece_before']:.3f} -> {fit['ece_after']:.3f})"
                )
            if threshold:
                fit = pipe.fit_threshold(examples, outcomes=outcomes)
                msg.info(f"{name}: entity threshold {fit['threshold']:.3g} (best-path dev F1 {fit['f1'] * 100:.2f})")
                fitted = fitted or pipe.ents_threshold == "fitted"
        if fitted:
            performance = nlp.meta.setdefault("performance", {})
            scores = nlp.evaluate(examples)
            performance.update({key: scores[key] for key in performance if key.startswith("ents_") and key in scores})
        return nlp

    return fit_before_saving


class _Checkpoints:
    """Which saves of spaCy's training loop the calibrator fits at (make_calibrator)."""

    def __init__(self) -> None:
        self.best: Optional[float] = None
        self.performance: Optional[Dict[str, Any]] = None

    def worth_fitting(self, nlp: Language) -> bool:
        """True outside a training loop, at the final save, and at a checkpoint that scores at
        least as well as every earlier one: the saves whose fit is kept (model-best, model-last)."""
        performance = nlp.meta.get("performance")
        # The loop's update_meta makes a new dict at every evaluation: the same one means none
        # since the previous save, i.e. the save after training (or a second call).
        if performance is self.performance:
            return True
        self.performance = performance
        weights = {key: w for key, w in nlp.config.get("training", {}).get("score_weights", {}).items() if w}
        if not performance or not any(key in performance for key in weights):
            return True
        score = sum(float(performance.get(key, 0.0)) * w for key, w in weights.items())
        if self.best is not None and score < self.best:
            return False
        self.best = score
        return True


@registry.misc("spacy-cner.fit_temperature.v1")
def make_temperature_fitter(path: Optional[str]) -> Callable[[Language], Language]:
    """spacy-cner.calibrate.v1 with the temperature only (configs written before the threshold).

    path (Optional[str]): A .spacy file or folder of them; None fits nothing.
    RETURNS (Callable[[Language], Language]): The callback.
    """
    return make_calibrator(path, temperature=True, threshold=False)


class CRFEntityRecognizer(TrainablePipe):
    """Tag tokens with a linear-chain CRF and set doc.ents, like spaCy's `ner`.

    Tags live on the doc's tokens: characters in a blank "zh" pipeline, words in a
    segmented doc. Entities already set on a doc (e.g. by an entity_ruler) are
    kept and predicted around, as spaCy's `ner` does; tokens with missing gold
    annotation are left out of the loss rather than taught "O".
    """

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "crf_ner",
        *,
        scheme: str = "BIOES",
        scorer: Optional[Callable] = ner_score,
        adversarial: Optional[EmbeddingAttack] = None,
        tok2vec_learn_rate_scale: float = 1.0,
        long_doc_window: int = 512,
        join_examples: float = 0.0,
        replace_mentions: float = 0.0,
        spans_key: Optional[str] = "crf_ner",
        candidate_threshold: float = 0.1,
        ents_threshold: Union[float, str, None] = "fitted",
        alignment_mode: str = "expand",
    ) -> None:
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.adversarial = adversarial
        # (examples, their gold constraints) while an update runs (see get_loss), else None.
        self._gold_cache: Optional[Tuple[List[Example], List[Floats2d]]] = None
        if not tok2vec_learn_rate_scale > 0:
            raise ValueError(f"tok2vec_learn_rate_scale must be positive, got {tok2vec_learn_rate_scale}.")
        if long_doc_window != 0 and long_doc_window < 2:
            raise ValueError(f"long_doc_window must be 0 (off) or at least 2 tokens, got {long_doc_window}.")
        self.long_doc_window = long_doc_window
        if not 0.0 <= join_examples <= 1.0:
            raise ValueError(f"join_examples is a share of each batch, from 0 to 1, got {join_examples}.")
        self.join_examples = join_examples
        if not 0.0 <= replace_mentions <= 1.0:
            raise ValueError(f"replace_mentions is a probability, from 0 to 1, got {replace_mentions}.")
        self.replace_mentions = replace_mentions
        # The mentions replace_mentions draws from: those of the examples seen at initialize and in update.
        self._mentions = MentionPool()
        if not candidate_threshold > 0:
            raise ValueError(f"candidate_threshold must be positive (above 1 for no alternatives), got {candidate_threshold}.")
        if not (ents_threshold in (None, "fitted") or (not isinstance(ents_threshold, str) and 0.0 <= ents_threshold <= 1.0)):
            raise ValueError(f"ents_threshold is a probability (from 0 to 1), \"fitted\" or None; got {ents_threshold!r}.")
        self.spans_key = spans_key
        self.candidate_threshold = candidate_threshold
        self.ents_threshold = ents_threshold
        self._warned_labels: set = set()
        # Set by the factory and by initialize(nlp=...).
        self.pipeline_link = PipelineLink()
        if alignment_mode not in ("strict", "contract", "expand"):
            raise ValueError(f"alignment_mode must be 'strict', 'contract' or 'expand', got {alignment_mode!r}.")
        self.alignment_mode = alignment_mode
        self.cfg: Dict = {
            "labels": [],
            "scheme": validate_scheme(scheme),
            "tok2vec_learn_rate_scale": tok2vec_learn_rate_scale,
            # Entity probabilities are computed with every CRF score divided by it (fit_temperature).
            "temperature": 1.0,
            # The probability doc.ents are decoded at with ents_threshold "fitted" (fit_threshold);
            # None (the best path) until fitted, and again once finish_update() changes the weights.
            "fitted_threshold": None,
            # "char" when the training docs' tokens were single characters (set at initialize).
            "token_unit": None,
        }

    @property
    def labels(self) -> Tuple[str, ...]:
        """The entity labels, in output order."""
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> Tuple[str, ...]:
        """The labels, as `spacy init labels` saves them."""
        return self.labels

    @property
    def tag_set(self) -> TagSet:
        """The CRF's tags: "O" and each label's scheme prefixes."""
        return TagSet(self.labels, self.cfg["scheme"])

    @property
    def tag_names(self) -> List[str]:
        """The names of the CRF's tags, in output order."""
        return list(self.tag_set.names)

    def scalar_mix_weights(self) -> Optional[Dict[str, object]]:
        """The tok2vec's learned layer mix, or None if it has no scalar mix.

        RETURNS (Optional[Dict[str, object]]): {"weights": softmax weight per layer
            (0 = embedding output), "gamma": the scale}. Also saved in the pipe's cfg.
        """
        tok2vec = self.model.get_ref("tok2vec") if self.model.has_ref("tok2vec") else None
        if tok2vec is None or not tok2vec.has_ref("scalar_mix"):
            return None
        mix = tok2vec.get_ref("scalar_mix")
        return layer_weights(mix) if mix.has_param("alpha") else None

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, Any]:
        """Score a batch of examples with the configured scorer.

        A robustness.PipelineScorer (spacy-cner.robust_ner_scorer.v1) also gets
        nlp=<the pipeline this pipe is in>, to run it on new texts.
        """
        if isinstance(self.scorer, PipelineScorer):
            kwargs["nlp"] = self._pipeline()
        return super().score(examples, **kwargs)

    def add_label(self, label: str) -> int:
        """Add an entity label. After initialization, as spaCy's `ner` does, the output layer
        and the CRF grow by the label's tags and keep every learned weight of the others (the
        new tags start at zero); train on with nlp.resume_training(): the optimizer that trained
        the pipe goes on, with fresh moments for the two resized layers.

        label (str): The label to add.
        RETURNS (int): 0 if the label is already present, otherwise 1.
        """
        if not isinstance(label, str) or not label.strip():
            raise ValueError(f"Invalid entity label {label!r}: expected a non-empty string.")
        if label in self.labels:
            return 0
        old_tags = self.tag_names
        self.cfg["labels"].append(label)
        self.vocab.strings.add(label)
        if self.model.get_ref("output_layer").has_param("W"):
            self._resize(old_tags, self.tag_names)
        return 1

    @property
    def entity_threshold(self) -> Optional[float]:
        """The probability doc.ents are decoded at (ents_threshold, or the fitted one), or None:
        the best tag sequence."""
        if self.ents_threshold == "fitted":
            return self.cfg.get("fitted_threshold")
        return self.ents_threshold

    def predict(self, docs: Iterable[Doc]) -> "Tagging":
        """The best tag-id sequence per doc, respecting pre-set entities, and the entity
        probabilities when spans_key or entity_threshold asks for them. Decoding at a threshold
        needs only the probabilities: the best path is then not computed (tag_ids None).

        docs (Iterable[Doc]): The docs to tag.
        RETURNS (Tagging): Tag ids (indices into self.tag_names) and scored spans per doc.
        """
        docs = list(docs)
        # A character model tags a doc of longer tokens on a character copy of it.
        char_docs = [self._char_doc(doc) for doc in docs]
        docs = [char_doc if char_doc is not None else doc for doc, char_doc in zip(docs, char_docs)]
        ents_threshold = self.entity_threshold
        decoded = self._decode(docs, best_path=ents_threshold is None)
        tag_ids = None
        if decoded.paths is not None:
            ops = self.model.ops
            by_doc: List[List[Ints1d]] = [[] for _ in docs]
            for (i, _, _), path in zip(decoded.segments, decoded.paths):
                by_doc[i].append(path)
            tag_ids = [ops.xp.concatenate(doc_paths) if doc_paths else ops.alloc1i(0) for doc_paths in by_doc]
        if self.spans_key is None and ents_threshold is None:
            return Tagging(tag_ids, None, char_docs, None)
        threshold = min(
            self.candidate_threshold if self.spans_key is not None else float("inf"),
            ents_threshold if ents_threshold is not None else float("inf"),
        )
        scores = self._span_scores(len(docs), decoded, threshold, self.cfg.get("temperature", 1.0))
        return Tagging(tag_ids, scores, char_docs, ents_threshold)

    def _decode(self, docs: List[Doc], best_path: bool = True) -> "_Decoded":
        """Emissions, constraints and (if best_path) Viterbi paths of the docs' segments: whole
        docs, or a long doc's windows, each ending at a sentence end (those over one long sentence
        together)."""
        ops = self.model.ops
        limit = self.long_doc_window
        windows = [
            doc_windows(doc, limit) if limit and len(doc) > limit else [Window(0, len(doc), 0, len(doc))]
            for doc in docs
        ]
        emissions = self._emissions(docs, windows) if any(len(doc) for doc in docs) else []
        ranges = [window_segments(doc_wins) if len(doc) else [] for doc, doc_wins in zip(docs, windows)]
        segments = [(i, start, end) for i, doc_ranges in enumerate(ranges) for start, end in doc_ranges]
        constraints = [
            None if c is None else self.model.ops.asarray2f(c)
            for doc, doc_ranges in zip(docs, ranges)
            for c in preset_constraints(doc, doc_ranges, self.tag_set)
        ]
        allowed = None
        if any(c is not None for c in constraints):
            n_tags = len(self.tag_names)
            allowed = [
                c if c is not None else ops.xp.ones((end - start, n_tags), dtype="f")
                for c, (_, start, end) in zip(constraints, segments)
            ]
        segment_emissions = [emissions[i][start:end] for i, start, end in segments]
        paths = None
        if best_path:
            paths = crf_decode(self.model.get_ref("crf"), segment_emissions, allowed) if segments else []
        return _Decoded(segments, segment_emissions, allowed, paths)

    def _span_scores(
        self, n_docs: int, decoded: "_Decoded", threshold: float, temperature: float
    ) -> List[Dict[Tuple[int, int, str], float]]:
        """Per doc, (start, end, label) -> probability of the best path's entities (when it was
        decoded) and the spans at or above threshold. A long doc's segments were decoded apart:
        so are their probabilities."""
        tag_names = self.tag_names
        to_list = self.model.ops.to_numpy
        if decoded.paths is None:
            predicted: List[List[Tuple[int, int, str]]] = [[] for _ in decoded.segments]
        else:
            predicted = [tags_to_spans([tag_names[t] for t in to_list(path).tolist()]) for path in decoded.paths]
        found = entity_probabilities(
            self.model.get_ref("crf"),
            decoded.emissions,
            predicted,
            self.cfg["scheme"],
            threshold,
            decoded.allowed,
            temperature=temperature,
        )
        scores: List[Dict[Tuple[int, int, str], float]] = [{} for _ in range(n_docs)]
        for (i, start, _), segment_found in zip(decoded.segments, found):
            scores[i].update({(s + start, e + start, label): p for (s, e, label), p in segment_found.items()})
        return scores

    def _emissions(self, docs: List[Doc], windows: List[List[Window]]) -> List[Floats2d]:
        """The model's emission scores per doc, computed for at most EMISSION_BATCH_TOKENS tokens
        at a time; each token's row comes from the window that owns it. Whole docs and the
        windows of long docs go to separate model calls (each call's docs of similar lengths).
        """
        ops = self.model.ops
        n_tags = len(self.tag_names)
        out: List[Optional[Floats2d]] = [None] * len(docs)
        whole = [(i, w[0]) for i, w in enumerate(windows) if len(w) == 1]
        pieces = [(i, window) for i, w in enumerate(windows) if len(w) > 1 for window in w]
        arrays = {i: docs[i].to_array(WINDOW_ATTRS) for i, w in enumerate(windows) if len(w) > 1}
        for chunk in _token_chunks(whole) + _token_chunks(pieces):
            unit_docs = [docs[i] if i not in arrays else window_doc(docs[i], w, arrays[i]) for i, w in chunk]
            for (i, w), scores in zip(chunk, self.model.predict(unit_docs)):
                if i not in arrays:
                    out[i] = scores
                    continue
                if out[i] is None:
                    out[i] = ops.alloc2f(len(docs[i]), n_tags)
                out[i][w.own_start : w.own_end] = scores[w.own_start - w.start : w.own_end - w.start]
        return [scores if scores is not None else ops.alloc2f(0, n_tags) for scores in out]

    def set_annotations(self, docs: Iterable[Doc], tagging: "Tagging") -> None:
        """Set doc.ents from the decoded tags, keeping pre-set entities, and the scored spans.

        docs (Iterable[Doc]): The docs to modify.
        tagging (Tagging): The output of predict.
        """
        tag_names = self.tag_names
        labels = set(self.labels)
        # As predict decoded them: the weights (and a fitted threshold) may have changed since.
        ents_threshold = tagging.ents_threshold
        docs = list(docs)
        tag_ids = tagging.tag_ids or [None] * len(docs)
        scores = tagging.scores or [None] * len(docs)
        char_docs = tagging.char_docs or [None] * len(docs)
        n_unaligned = 0
        for doc, ids, doc_scores, char_doc in zip(docs, tag_ids, scores, char_docs):
            # Pre-set entities come back unchanged (kb_id too); those of labels we
            # don't predict were decoded as "O" and are added back.
            preset = {(ent.start, ent.end, ent.label_): ent for ent in doc.ents}
            if ents_threshold is None:
                found = tags_to_spans([tag_names[i] for i in self.model.ops.to_numpy(ids).tolist()])
            else:
                tagged = doc if char_doc is None else char_doc
                kept = [(ent.start, ent.end, ent.label_) for ent in tagged.ents if ent.label_ in labels]
                found = most_probable_spans(doc_scores, ents_threshold, required=kept)
            if char_doc is not None:
                found, lost = _align(char_doc, doc, found, self.alignment_mode)
                n_unaligned += lost
                if doc_scores is not None:
                    doc_scores = _align_scores(char_doc, doc, doc_scores, self.alignment_mode)
            spans = [preset.get(span) or Span(doc, *span) for span in found]
            spans.extend(ent for ent in doc.ents if ent.label_ not in labels)
            doc.set_ents(sorted(spans), default="outside")
            if self.spans_key is not None:
                # The entities and the alternatives at or above candidate_threshold.
                shown = set(found)
                ordered = sorted(s for s, p in doc_scores.items() if p >= self.candidate_threshold or s in shown)
                group = SpanGroup(doc, name=self.spans_key, spans=[Span(doc, *span) for span in ordered])
                group.attrs["scores"] = numpy.asarray([doc_scores[span] for span in ordered], dtype="float32")
                doc.spans[self.spans_key] = group
        if n_unaligned:
            warnings.warn(
                f"'{self.name}' tags characters; {n_unaligned} entities found in this batch did not map onto "
                f"the docs' tokens (alignment_mode '{self.alignment_mode}') or overlapped once mapped, and were "
                "left out. Use a character tokenizer (spacy-cner.ChineseTokenizer.v1, segmenter \"char\") or "
                "alignment_mode \"expand\".",
                stacklevel=2,
            )

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Learn from a batch of examples.

        With adversarial training, a second forward/backward pass on perturbed
        embeddings adds its gradients before the optimizer step (its loss is
        reported as "<name>_adversarial"). A CRF tagger whose tok2vec or encoder has an
        entity_attention_scale gets (docs, gold entity ids) in these passes and hands the ids
        to that layer (spacy_cner.entity_attention).

        examples (Iterable[Example]): The gold examples.
        drop (float): The dropout rate.
        sgd (Optional[Optimizer]): The optimizer.
        losses (Optional[Dict[str, float]]): Losses by component, updated in place.
        RETURNS (Dict[str, float]): The updated losses.
        """
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = [eg for eg in examples if len(eg.predicted)]
        validate_examples(examples, "CRFEntityRecognizer.update")
        if not examples:
            return losses
        self._warn_unknown_labels(examples)
        if self.replace_mentions:
            self._mentions.add(examples)
            examples = self._mentions.replace(examples, self.replace_mentions)
        if self.join_examples:
            examples = join_pairs(examples, self.join_examples)
        set_dropout_rate(self.model, drop)
        docs = [eg.predicted for eg in examples]
        # Layers with an entity-label enhancement read the gold entities beside the docs.
        X = (docs, [example_entity_ids(eg) for eg in examples]) if self._uses_gold_entities() else docs
        self._gold_cache = ([], [])
        # Products in one piece (layers._blas.training_products): a step compares nothing across batches.
        try:
            with training_products():
                emissions, backprop = self.model.begin_update(X)
                loss, d_emissions = self.get_loss(examples, emissions)
                backprop(d_emissions)
                if self.adversarial is not None:
                    restore = self.adversarial.perturb(self.model)
                    try:
                        emissions, backprop = self.model.begin_update(X)
                        adversarial_loss, d_emissions = self.get_loss(examples, emissions)
                        backprop(d_emissions)
                    finally:
                        restore()
                    key = f"{self.name}_adversarial"
                    losses[key] = losses.get(key, 0.0) + adversarial_loss
        finally:
            self._gold_cache = None
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        """Update the weights, the tok2vec's at tok2vec_learn_rate_scale times the optimizer's rate
        (except a lexicon adapter's inside the tok2vec: new weights, the full rate).

        sgd (Optimizer): The optimizer.
        """
        # A threshold fitted on the old weights no longer holds (nor shows in dev scores).
        self.cfg["fitted_threshold"] = None
        scale = self.cfg.get("tok2vec_learn_rate_scale", 1.0)
        # A lexicon adapter inside the tok2vec is new, like the layers above: full rate.
        adapters = [n for n in self.model.walk() if n.name == "lexicon_adapter"]
        own_rate = {node.id for adapter in adapters for node in adapter.walk()}
        tok2vec_nodes = {node.id for node in self.model.get_ref("tok2vec").walk()} - own_rate if scale != 1.0 else set()
        scaled = _ScaledOptimizer(sgd, scale)
        for node in self.model.walk():
            optimizer = scaled if node.id in tok2vec_nodes else sgd
            for shim in node.shims:
                shim.finish_update(optimizer)
        for node in self.model.walk():
            optimizer = scaled if node.id in tok2vec_nodes else sgd
            if node.name == "key_embed":
                # Exact tables: only the rows this step's examples touched (KeyEmbed.v1).
                update_rows(node, optimizer)
                continue
            for name in node.param_names:
                if node.has_grad(name):
                    param, _ = optimizer((node.id, name), node.get_param(name), node.get_grad(name))
                    node.set_param(name, param)

    def get_loss(self, examples: Iterable[Example], scores: List[Floats2d]) -> Tuple[float, List[Floats2d]]:
        """The CRF negative log-likelihood of the gold tags and its gradient.

        Tokens whose gold tag is missing are marginalised over. The CRF's own
        transition gradients are accumulated too, for the next finish_update.

        examples (Iterable[Example]): The gold examples, none empty.
        scores (List[Floats2d]): The emission scores from the model.
        RETURNS (Tuple[float, List[Floats2d]]): The loss and d_scores.
        """
        examples = list(examples)
        validate_examples(examples, "CRFEntityRecognizer.get_loss")
        # Within an update, the adversarial pass scores the same examples again: reuse their
        # constraints (the cache holds the examples, so their ids stay theirs).
        cache = self._gold_cache
        if cache is not None and len(cache[0]) == len(examples) and all(a is b for a, b in zip(cache[0], examples)):
            allowed = cache[1]
        else:
            allowed = [self.model.ops.asarray2f(gold_constraints(aligned_ner(eg), self.tag_set)) for eg in examples]
            if cache is not None:
                self._gold_cache = (examples, allowed)
        crf = self.model.get_ref("crf")
        log_likelihood, backprop = crf.begin_update((scores, allowed))
        d_scores, _ = backprop(-self.model.ops.xp.ones_like(log_likelihood))
        return float(-log_likelihood.sum()), d_scores

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Sequence[str]] = None,
        lexicon: Optional[Lexicon] = None,
    ) -> None:
        """Take labels from `labels` or the examples, then initialize the model.

        get_examples (Callable[[], Iterable[Example]]): Returns the training examples.
        nlp (Optional[Language]): The current nlp object.
        labels (Optional[Sequence[str]]): Labels, e.g. from `spacy init labels`.
        lexicon (Optional[Lexicon]): For a model with a lexicon adapter
            (spacy-cner.LexiconAdapter.v1) or a soft lexicon (spacy-cner.SoftLexicon.v1):
            its words, tags and vectors, e.g. from
            [initialize.components.crf_ner.lexicon] with spacy-cner.lexicon.v1. It is
            saved with the pipe; None keeps the lexicon a loaded pipe already has.
        """
        validate_get_examples(get_examples, "CRFEntityRecognizer.initialize")
        if nlp is not None:
            self.pipeline_link = PipelineLink(nlp)
            self._check_vectors(nlp)
        if labels is not None:
            for label in labels:
                self.add_label(label)
        if self.replace_mentions:
            self._mentions.add(get_examples())
        if labels is None and not self.labels:
            found = {ent.label_ for eg in get_examples() for ent in eg.reference.ents}
            for label in sorted(found):
                self.add_label(label)
        if not self.labels:
            raise ValueError(
                f"'{self.name}' has no labels: the training examples hold no entities and "
                "none were given. Check the corpus, or set [initialize.components."
                f"{self.name}.labels]."
            )
        self._set_lexicon(lexicon)
        # The first ten non-empty docs, without reading the rest of the corpus.
        doc_sample = list(itertools.islice((eg.predicted for eg in get_examples() if len(eg.predicted)), 10))
        if not doc_sample:
            raise ValueError(f"'{self.name}' needs at least one non-empty training doc to initialize.")
        # Whether the model learns on characters: then a doc of longer tokens is tagged on its characters.
        chars = all(len(t) == 1 for doc in doc_sample for t in doc if not t.is_space)
        self.cfg["token_unit"] = "char" if chars else "token"
        # Exact bigram tables (CharBigramEmbed.v2, bigram_rows null): a row per bigram of the corpus.
        rows = size_key_tables(self.model, (eg.predicted for eg in get_examples()))
        if rows:
            msg.info(f"{self.name}: exact bigram tables of {' and '.join(f'{n:,}' for n in rows.values())} rows "
                     "(the train corpus's bigrams, and one unknown row)")
        self.model.initialize(X=doc_sample, Y=self.tag_names)

    def fit_temperature(
        self, examples: Iterable[Example], *, outcomes: Optional[Callable[[float], Tuple[numpy.ndarray, numpy.ndarray]]] = None
    ) -> Dict[str, float]:
        """Fit the temperature of the entity probabilities on held-out examples (dev), and keep it.

        The temperature from 1/4 to 4 under which the probabilities of the predicted entities
        best predict whether each is right (an exact match of a gold entity): the least binary
        log loss, on a log grid of 9 and then of 9 between the best one's neighbours (steps of
        9%; 15 forward-backward passes over the examples where one grid that fine takes 33: it
        runs before each save in training). Stored in cfg["temperature"], so it is saved with
        the pipe; the predicted entities themselves do not change.

        examples (Iterable[Example]): Held-out gold examples; their predicted docs are tagged.
        outcomes (Optional[Callable]): entity_outcomes(examples), when the caller has it (one
            decoding for fit_temperature and fit_threshold).
        RETURNS (Dict[str, float]): temperature (1 when no entity is predicted), n_entities (the
            predicted entities it was fitted on), and log_loss / ece (10 bins) at temperature 1
            and at the fitted one.
        """
        if outcomes is None:
            outcomes = self.entity_outcomes(examples)

        def log_loss(probs: numpy.ndarray, right: numpy.ndarray) -> float:
            probs = numpy.clip(probs, 1e-7, 1 - 1e-7)
            return float(-(right * numpy.log(probs) + (1 - right) * numpy.log(1 - probs)).mean()) if len(probs) else 0.0

        seen: Dict[float, Tuple[numpy.ndarray, numpy.ndarray]] = {}

        def at(temperature: float) -> Tuple[numpy.ndarray, numpy.ndarray]:
            temperature = round(float(temperature), 4)  # as the saved cfg keeps it
            if temperature not in seen:
                seen[temperature] = outcomes(temperature)
            return seen[temperature]

        if len(at(1.0)[0]):
            coarse = numpy.linspace(numpy.log(0.25), numpy.log(4.0), 9)  # 1 is the middle one
            i = int(numpy.argmin([log_loss(*at(numpy.exp(x))) for x in coarse]))
            fine = numpy.exp(numpy.linspace(coarse[max(i - 1, 0)], coarse[min(i + 1, 8)], 9))
            best = min((round(float(t), 4) for t in fine), key=lambda t: log_loss(*at(t)))
        else:
            best = 1.0  # no predicted entity to fit on (e.g. a model that has not learnt yet)
        before, after = at(1.0), at(best)
        self.cfg["temperature"] = best
        return {
            "temperature": best,
            "n_entities": len(before[0]),
            "log_loss_before": log_loss(*before),
            "log_loss_after": log_loss(*after),
            "ece_before": expected_calibration_error(*before),
            "ece_after": expected_calibration_error(*after),
        }

    def fit_threshold(
        self, examples: Iterable[Example], *, outcomes: Optional[Callable[[float], Tuple[numpy.ndarray, numpy.ndarray]]] = None
    ) -> Dict[str, float]:
        """Fit the probability doc.ents are decoded at (ents_threshold "fitted") on held-out
        examples (dev), and keep it in cfg["fitted_threshold"].

        Half the F1 of the best-path entities on the examples: for calibrated probabilities
        (fit_temperature first), the threshold that maximises F1 is half the best F1 (Lipton,
        Elkan and Naryanaswamy 2014, "Thresholding classifiers to maximize F1 score"). One
        number from dev, not a search over thresholds: stable on a dev set of a few hundred
        sentences. At least 0.1 (the default candidate_threshold), for an untrained model.

        examples (Iterable[Example]): Held-out gold examples; their predicted docs are tagged.
        outcomes (Optional[Callable]): entity_outcomes(examples), when the caller has it.
        RETURNS (Dict[str, float]): threshold, and f1 of the best path on the examples.
        """
        examples = list(examples)
        if outcomes is None:
            outcomes = self.entity_outcomes(examples)
        _, right = outcomes(self.cfg.get("temperature", 1.0))
        n_gold = sum(len(eg.get_aligned_spans_y2x(eg.reference.ents)) for eg in examples)
        f1 = 2 * float(right.sum()) / (len(right) + n_gold) if len(right) + n_gold else 0.0
        self.cfg["fitted_threshold"] = round(max(0.1, f1 / 2), 4)  # as the saved cfg keeps it
        return {"threshold": self.cfg["fitted_threshold"], "f1": f1}

    def entity_outcomes(self, examples: Iterable[Example]) -> Callable[[float], Tuple[numpy.ndarray, numpy.ndarray]]:
        """Tag the examples' predicted docs once; the returned function gives, at a temperature,
        each predicted entity's probability and whether it is right (1.0: an exact match of a
        gold entity), for calibration.

        examples (Iterable[Example]): Gold examples.
        RETURNS (Callable[[float], Tuple[numpy.ndarray, numpy.ndarray]]): temperature -> (probabilities, right).
        """
        examples = list(examples)
        validate_examples(examples, "CRFEntityRecognizer.entity_outcomes")
        docs = [eg.predicted.copy() for eg in examples]
        decoded = self._decode(docs)
        gold = [{(e.start, e.end, e.label_) for e in eg.get_aligned_spans_y2x(eg.reference.ents)} for eg in examples]

        def outcomes(temperature: float) -> Tuple[numpy.ndarray, numpy.ndarray]:
            scores = self._span_scores(len(docs), decoded, float("inf"), temperature)
            pairs = [(p, span in doc_gold) for doc_scores, doc_gold in zip(scores, gold) for span, p in doc_scores.items()]
            if not pairs:
                return numpy.zeros(0), numpy.zeros(0)
            probs, right = zip(*pairs)
            return numpy.asarray(probs, dtype="float64"), numpy.asarray(right, dtype="float64")

        return outcomes

    def _check_vectors(self, nlp: Language) -> None:
        """Raise if the pipeline has vectors that no component's model reads.

        spaCy loads [initialize] vectors (--paths.vectors) into the vocab whatever the
        models are; a model without a static-vectors layer would silently train without them.
        """
        vectors = nlp.vocab.vectors
        if not vectors.shape[0]:
            return
        models = [getattr(proc, "model", None) for _, proc in nlp.pipeline]
        readers = ("static_vectors", "char_bigram_vectors")
        if any(isinstance(m, Model) and any(n.name in readers for n in m.walk()) for m in models):
            return
        raise ValueError(
            f"The pipeline has {vectors.n_keys} vectors of width {vectors.shape[1]} ([initialize] "
            f"vectors, e.g. from --paths.vectors), but no component reads them: the model of "
            f"'{self.name}' has no static-vectors layer, so they would be ignored. Set static_vectors "
            "= true in spacy-cner.CharBigramEmbed.v1 (character and bigram vectors), use another "
            "tok2vec that reads them (spacy.MultiHashEmbed.v2 with include_static_vectors = true), "
            "or set paths.vectors = null."
        )

    def _lexicon_layers(self) -> List[Model]:
        """The layers that read the lexicon: lexicon adapters and soft lexicons."""
        return [node for node in self.model.walk() if node.name in ("lexicon_adapter", "soft_lexicon")]

    def _lexicon_bytes(self) -> Optional[bytes]:
        """The lexicon of each lexicon layer (vectors in float16), or None without any."""
        lexicons = [adapter_lexicon(adapter) for adapter in self._lexicon_layers()]
        if not lexicons or any(lexicon is None for lexicon in lexicons):
            return None
        return srsly.msgpack_dumps([lexicon.to_bytes() for lexicon in lexicons])

    def _load_lexicons(self, data: Optional[bytes], source: str) -> None:
        """Give each lexicon layer its saved lexicon (data from _lexicon_bytes; None: none saved)."""
        if data is None:
            return
        adapters = self._lexicon_layers()
        lexicons = srsly.msgpack_loads(data)
        if len(lexicons) != len(adapters):
            raise ValueError(
                f"{source} holds {len(lexicons)} lexicons but the model of '{self.name}' has "
                f"{len(adapters)} lexicon layers."
            )
        for adapter, lexicon in zip(adapters, lexicons):
            set_lexicon(adapter, Lexicon.from_bytes(lexicon))

    def _set_lexicon(self, lexicon: Optional[Lexicon]) -> None:
        """Give every lexicon layer (adapter, soft lexicon) in the model the lexicon."""
        adapters = self._lexicon_layers()
        if lexicon is None:
            return
        if not adapters:
            raise ValueError(
                f"'{self.name}' got a lexicon but its model has no layer that reads one: add "
                "spacy-cner.LexiconAdapter.v1 as the lexicon_adapter of the tok2vec "
                "(see configs/lexicon.cfg) or spacy-cner.SoftLexicon.v1 as its soft_lexicon "
                "(configs/default.cfg), or remove the lexicon from [initialize.components]."
            )
        for adapter in adapters:
            set_lexicon(adapter, lexicon)

    def _uses_gold_entities(self) -> bool:
        """Whether the model reads gold entities in training: a CRF tagger whose tok2vec or encoder
        has an entity-label enhancement (entity_attention_scale > 0). An enhanced layer anywhere
        else (another architecture, or moved deeper, e.g. by replace_listeners) would never get
        them, so it raises instead of training without them."""
        # Only CRFTagger.v1 hands gold entities on, and only to its tok2vec and encoder.
        is_tagger = self.model.name == "crf_tagger"
        fed = [self.model.maybe_get_ref("tok2vec"), self.model.maybe_get_ref("encoder")] if is_tagger else []
        unfed = gold_layers_out_of_reach([self.model], fed)
        if unfed and not is_tagger:
            raise ValueError(
                f"'{self.name}' has a layer with an entity_attention_scale ({unfed[0].name}) in a "
                f"'{self.model.name}' model: only spacy-cner.CRFTagger.v1 hands it the gold entities. "
                "Use that architecture, or set entity_attention_scale to 0."
            )
        if unfed:
            raise ValueError(
                f"'{self.name}' has a layer with an entity_attention_scale ({unfed[0].name}) inside its "
                "tok2vec or encoder, where the CRF tagger cannot hand it the gold entities: make it "
                "the tagger's tok2vec or encoder itself, or set its entity_attention_scale to 0."
            )
        return any(layer is not None and takes_gold(layer) for layer in fed)

    def _pipeline(self) -> Language:
        """The pipeline this pipe was created or initialized in."""
        # A pipe pickled before pipeline_link existed has none.
        link = getattr(self, "pipeline_link", None)
        nlp = link() if link is not None else None
        if nlp is None or not any(pipe is self for _, pipe in nlp.pipeline):
            raise ValueError(
                f"The scorer of '{self.name}' runs the pipeline, but '{self.name}' is not in the pipeline "
                "it was created or initialized in (a sourced or copied component?). Initialize it "
                "in its pipeline, or use spacy.ner_scorer.v1."
            )
        return nlp

    def _check_calibration(self, cfg_source: str) -> None:
        """Raise if the loaded cfg's temperature or fitted threshold cannot be what fitting stored."""
        checks = (("temperature", lambda v: v > 0, "a finite number above 0"),
                  ("fitted_threshold", lambda v: 0 < v <= 1, "a probability in (0, 1]"))
        for key, valid, expected in checks:
            value = self.cfg.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not valid(value):
                raise ValueError(
                    f"{cfg_source} of '{self.name}' has {key} = {value!r}: expected {expected} (or null). "
                    "Restore the cfg saved with the model, or set it to null and refit it on dev "
                    "(the pipe's fit_temperature and fit_threshold)."
                )

    def _check_tag_names(self, cfg_source: str) -> None:
        """Raise if the loaded cfg's labels and scheme name other tags than the CRF was trained with."""
        trained = torch_module(self.model.get_ref("crf")).tag_names
        if trained and trained != self.tag_names:
            raise ValueError(
                f"{cfg_source} of '{self.name}' gives labels {list(self.labels)} with scheme "
                f"{self.cfg['scheme']}, i.e. tags {self.tag_names}, but its model was trained with "
                f"the tags {trained}: the cfg and the weights do not belong together. Restore the "
                "cfg saved with the model (or retrain)."
            )

    def _record_scalar_mix(self) -> None:
        weights = self.scalar_mix_weights()
        if weights is not None:
            self.cfg["scalar_mix"] = weights

    def _char_doc(self, doc: Doc) -> Optional[Doc]:
        """A copy of the doc with one token per character (and its pre-set entities), when the
        model was trained on characters and the doc has longer tokens; else None."""
        if self.cfg.get("token_unit") != "char" or not len(doc):
            return None
        lengths, is_space = doc.to_array([LENGTH, IS_SPACE]).T
        if not (lengths[is_space == 0] > 1).any():
            return None
        words, spaces = words_and_spaces(list(doc.text), doc.text)
        char_doc = Doc(doc.vocab, words=words, spaces=spaces)
        char_doc.set_ents(
            [char_doc.char_span(e.start_char, e.end_char, label=e.label, kb_id=e.kb_id) for e in doc.ents],
            default="unmodified",
        )
        return char_doc

    def _warn_unknown_labels(self, examples: Sequence[Example]) -> None:
        """Warn, once per label, about gold entities whose label the pipe does not predict."""
        labels = set(self.labels)
        unknown = Counter(ent.label_ for eg in examples for ent in eg.reference.ents if ent.label_ not in labels)
        new = {label: count for label, count in unknown.items() if label not in self._warned_labels}
        if new:
            counts = ", ".join(f"{label} ({count})" for label, count in sorted(new.items()))
            warnings.warn(
                f"'{self.name}' does not predict the labels of some gold entities in this batch: {counts}. "
                "Their tokens are left out of the loss, as unannotated ones. Add the labels before "
                "initialize ([initialize.components] labels, or add_label), or remove them from the data.",
                stacklevel=2,
            )
            self._warned_labels.update(new)

    def _resize(self, old_tags: List[str], new_tags: List[str]) -> None:
        """Grow the output layer and the CRF from old_tags to new_tags, weights kept by tag name."""
        old_index = {tag: i for i, tag in enumerate(old_tags)}
        rows = numpy.asarray([old_index.get(tag, -1) for tag in new_tags])
        kept = rows >= 0
        ops = self.model.ops
        output = self.model.get_ref("output_layer")
        W, b = ops.to_numpy(output.get_param("W")), ops.to_numpy(output.get_param("b"))
        new_W = numpy.zeros((len(new_tags), W.shape[1]), dtype=W.dtype)
        new_b = numpy.zeros((len(new_tags),), dtype=b.dtype)
        new_W[kept], new_b[kept] = W[rows[kept]], b[rows[kept]]
        # A layer's dims are fixed once it has weights: swap in a larger Linear (as spaCy's
        # parser resizes its output), then widen the weightless layers around it.
        larger = Linear(nO=len(new_tags), nI=W.shape[1])
        larger.set_param("W", ops.asarray2f(new_W))
        larger.set_param("b", ops.asarray1f(new_b))
        for node in list(self.model.walk()):
            if output in node.layers:
                node.layers[node.layers.index(output)] = larger
        for node in self.model.walk():
            if node.has_ref("output_layer"):
                node.set_ref("output_layer", larger)
        for node in self.model.walk():
            if node is not larger and larger in node.walk() and node.has_dim("nO"):
                node.set_dim("nO", len(new_tags), force=True)
        resize_crf(self.model.get_ref("crf"), new_tags)

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        """Serialize the pipe: cfg (recording the learned scalar mix, for reading without
        loading), vocab, model and, for a model with lexicon layers (adapters, soft lexicons),
        "lexicon": their lexicons."""
        self._record_scalar_mix()
        model_bytes = self._model_bytes(exclude)
        serializers = {
            "cfg": lambda: srsly.json_dumps(self.cfg),
            "vocab": lambda: self.vocab.to_bytes(exclude=exclude),
            "model": lambda: model_bytes,
            "lexicon": self._lexicon_bytes,
        }
        return util.to_bytes(serializers, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "CRFEntityRecognizer":
        """Load the pipe, and the lexicons of its lexicon layers."""
        deserializers = {
            "cfg": lambda b: self.cfg.update(srsly.json_loads(b)),
            "vocab": lambda b: self.vocab.from_bytes(b, exclude=exclude),
            "model": lambda b: self._load_model(b, "the model in the bytes"),
            "lexicon": lambda b: self._load_lexicons(b, "bytes"),
        }
        util.from_bytes(bytes_data, deserializers, exclude)
        self._check_tag_names("the cfg in the bytes")
        self._check_calibration("the cfg in the bytes")
        return self

    def to_disk(self, path, *, exclude=tuple()) -> None:
        """Save the pipe (see to_bytes); the lexicons in the file "lexicon"."""
        self._record_scalar_mix()

        def write_lexicon(p: Path) -> None:
            data = self._lexicon_bytes()
            if data is not None:
                p.write_bytes(data)

        model_bytes = self._model_bytes(exclude)
        serializers = {
            "cfg": lambda p: srsly.write_json(p, self.cfg),
            "vocab": lambda p: self.vocab.to_disk(p, exclude=exclude),
            "model": lambda p: p.write_bytes(model_bytes),
            "lexicon": write_lexicon,
        }
        util.to_disk(path, serializers, exclude)

    def from_disk(self, path, *, exclude=tuple()) -> "CRFEntityRecognizer":
        """Load the pipe, and the lexicons of its lexicon layers."""
        deserializers = {
            "cfg": lambda p: self.cfg.update(_read_json(p)),
            "vocab": lambda p: self.vocab.from_disk(p, exclude=exclude),
            "model": lambda p: self._load_model(p.read_bytes(), str(p)),
            "lexicon": lambda p: self._load_lexicons(p.read_bytes(), str(p)) if p.exists() else None,
        }
        util.from_disk(path, deserializers, exclude)
        self._check_tag_names(str(Path(path) / "cfg"))
        self._check_calibration(str(Path(path) / "cfg"))
        return self

    def _model_bytes(self, exclude) -> Optional[bytes]:
        """The model's bytes, their sha256 recorded in cfg (saved with them, checked at load)."""
        if "model" in exclude:
            self.cfg.pop("model_sha256", None)  # nothing to check it against
            return None
        data = self.model.to_bytes()
        self.cfg["model_sha256"] = hashlib.sha256(data).hexdigest()
        return data

    def _load_model(self, data: bytes, source: str) -> None:
        expected = self.cfg.get("model_sha256")
        if expected is not None and hashlib.sha256(data).hexdigest() != expected:
            raise ValueError(
                f"{source} does not match the checksum saved with it in the cfg (sha256 {expected[:12]}...): "
                "the file is truncated or altered. Restore the pipeline's files as they were saved."
            )
        try:
            self.model.from_bytes(data)
        except AttributeError:
            raise ValueError(Errors.E149) from None
        except (ValueError, TypeError, KeyError, IndexError) as err:
            if "Refused to load" in str(err):  # a tampered transformer: its own message says what
                raise
            raise ValueError(f"{source} cannot be read as the model's weights ({type(err).__name__}: {err}): "
                             "the file is truncated or altered.") from err


def _read_json(path: Path) -> Dict[str, Any]:
    """A saved cfg, its file named in the error when it is not JSON (srsly says only where)."""
    try:
        return srsly.read_json(path)
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err}): restore the file saved with the model.") from None


@dataclass
class Tagging:
    """What CRFEntityRecognizer.predict found in a batch of docs."""

    # Per doc, the best tag ids (indices into the pipe's tag_names); None when doc.ents are
    # decoded at a threshold, which needs no best path.
    tag_ids: Optional[List[Ints1d]]
    # Per doc, (start token, end token, label) -> its probability: the best path's entities (when
    # decoded) and the spans above candidate_threshold (or entity_threshold, if lower); None when
    # the pipe computes no probabilities.
    scores: Optional[List[Dict[Tuple[int, int, str], float]]]
    # Per doc, the character copy it was tagged on (tag ids and scores index its tokens), or
    # None where the doc was tagged as it is.
    char_docs: Optional[List[Optional[Doc]]] = None
    # The probability doc.ents are decoded at (the most probable spans); None: the best path.
    ents_threshold: Optional[float] = None


def expected_calibration_error(probs: numpy.ndarray, right: numpy.ndarray, n_bins: int = 10) -> float:
    """Expected calibration error: over n_bins equal-width bins of probability, the share of
    the predictions in each bin times |their accuracy - their mean probability|, summed."""
    if not len(probs):
        return 0.0
    bins = numpy.minimum((numpy.asarray(probs) * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        inside = bins == b
        if inside.any():
            total += inside.mean() * abs(float(numpy.mean(right[inside])) - float(numpy.mean(probs[inside])))
    return total


@dataclass
class _Decoded:
    """The segments (doc index, start token, end token) of a batch and their emissions,
    tag constraints (None: all allowed) and Viterbi paths (None: not decoded)."""

    segments: List[Tuple[int, int, int]]
    emissions: List[Floats2d]
    allowed: Optional[List[Floats2d]]
    paths: Optional[List[Ints1d]]


def _align(
    char_doc: Doc, doc: Doc, spans: Sequence[Tuple[int, int, str]], mode: str
) -> Tuple[List[Tuple[int, int, str]], int]:
    """Entities (token spans of char_doc) as token spans of doc, by Doc.char_span in this
    alignment mode; those that do not map, or overlap an earlier one once mapped, are left
    out. RETURNS: the spans and how many were left out."""
    aligned: List[Tuple[int, int, str]] = []
    taken = numpy.zeros(len(doc) + 1, dtype=bool)
    for start, end, label in spans:
        span = _token_span(char_doc, doc, start, end, mode)
        if span is None or taken[span.start : span.end].any():
            continue
        taken[span.start : span.end] = True
        aligned.append((span.start, span.end, label))
    return aligned, len(spans) - len(aligned)


def _token_span(char_doc: Doc, doc: Doc, start: int, end: int, mode: str) -> Optional[Span]:
    """Tokens start..end of char_doc as a non-empty span of doc's tokens (Doc.char_span in
    this alignment mode), or None."""
    span = doc.char_span(char_doc[start].idx, char_doc[end - 1].idx + len(char_doc[end - 1]), alignment_mode=mode)
    return span if span is not None and len(span) else None


def _align_scores(
    char_doc: Doc, doc: Doc, scores: Dict[Tuple[int, int, str], float], mode: str
) -> Dict[Tuple[int, int, str], float]:
    """Scored spans of char_doc as spans of doc (see _align); spans that map onto the same
    tokens keep the highest probability."""
    out: Dict[Tuple[int, int, str], float] = {}
    for (start, end, label), probability in scores.items():
        span = _token_span(char_doc, doc, start, end, mode)
        if span is not None:
            key = (span.start, span.end, label)
            out[key] = max(probability, out.get(key, 0.0))
    return out


def join_pairs(examples: List[Example], share: float) -> List[Example]:
    """Join a share of the examples in random pairs, predicted and reference docs alike.

    Training on X_i + X_j (nothing between, as spacy_cner.robustness joins test sentences)
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
        predicted = _join_docs([eg.predicted for eg in pair])
        reference = Doc.from_docs([eg.reference for eg in pair], ensure_whitespace=False)
        joined.append(Example(predicted, reference))
    return [examples[i] for i in rest] + joined


def _join_docs(docs: Sequence[Doc]) -> Doc:
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


def _token_chunks(units: List[Tuple[int, Window]]) -> List[List[Tuple[int, Window]]]:
    """Consecutive units (doc index, window) in chunks of at most EMISSION_BATCH_TOKENS tokens
    (or one unit)."""
    chunks: List[List[Tuple[int, Window]]] = []
    n_tokens = 0
    for unit in units:
        length = unit[1].end - unit[1].start
        if chunks and n_tokens + length <= EMISSION_BATCH_TOKENS:
            chunks[-1].append(unit)
            n_tokens += length
        else:
            chunks.append([unit])
            n_tokens = length
    return chunks


class _ScaledOptimizer:
    """An optimizer whose learning rate is `scale` times the wrapped one's (schedules included)."""

    def __init__(self, optimizer: Optimizer, scale: float):
        self._optimizer = optimizer
        self._scale = scale

    def __call__(self, key, weights, gradient, *, lr_scale: float = 1.0):
        return self._optimizer(key, weights, gradient, lr_scale=lr_scale * self._scale)

    def __getattr__(self, name):
        return getattr(self._optimizer, name)
