"""The `crf_ner` pipe: named entities from a CRF over per-token emission scores."""

import itertools
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from spacy import util
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.pipeline.ner import ner_score
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer, set_dropout_rate
from thinc.types import Floats1d, Floats2d
from wasabi import msg

from ..annotate.uncertainty import SPAN_STRATEGIES, STRATEGIES, strategy_score
from ..training.adversarial import EmbeddingAttack
from ..training.augment import MentionPool, join_pairs
from ..training.distill.loss import SoftTargets, soft_targets, teacher_student_loss
from ..layers.entity_attention import example_entity_ids
from ..backends.rowwise_ops import training_products
from ..backends.threads import TorchThreadsSetting, check_threads, torch_threads
from ..layers.char_bigram_embed import size_key_tables
from ..layers.scalar_mix import tok2vec_mix_weights
from ..corpus.labels import explain_labels
from ..corpus.labels import label_descriptions as describe_labels
from ..lexicon import Lexicon
from ..robustness.metrics import PipelineLink, PipelineScorer
from ..tags import TagSet, aligned_ner, gold_constraints, validate_scheme
from ..tokenizer import character_copy
from . import calibration
from .alignment import token_unit
from .calibration import Outcomes
from .checks import (
    check_calibration,
    check_labels,
    check_precision,
    check_tag_names,
    check_vectors,
    match_vectors,
    uses_gold_entities,
    validate_settings,
    warn_unaligned,
    warn_unknown_labels,
)
from .decoding import (
    Decoded,
    SpanScores,
    Tagging,
    decode_in_precision,
    doc_entities,
    set_doc_entities,
    span_scores,
    tag_docs,
)
from .lexicons import set_model_lexicon, warm_up_lexicons
from .optimizer import apply_gradients
from .resize import resize_output
from .serialization import (
    bytes_readers,
    bytes_writers,
    file_readers,
    file_writers,
    reads_vectors,
    validate_save_weights,
)

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


# The examples initialize validates and samples: the first few of the corpus.
INIT_SAMPLE = 10


def _first_examples(get_examples: Any) -> Any:
    """get_examples, to spaCy's validate_get_examples, as the first INIT_SAMPLE examples it gives.

    validate_get_examples checks the type of every example, a pass over the whole corpus: on a
    distilled student's corpus (millions of characters with the teacher's soft targets) that pass
    took minutes. update validates each batch's examples anyway. A value that is not callable, or
    not iterable when called, goes to spaCy's check as it is (and fails there).
    """
    if not callable(get_examples):
        return get_examples

    def first() -> Any:
        examples = get_examples()
        if examples is None or not isinstance(examples, Iterable):
            return examples
        return list(itertools.islice(examples, INIT_SAMPLE))

    return first


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
        "save_weights": "float32",
        "precision": "float32",
        "torch_threads": 1,
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
    save_weights: str,
    precision: str,
    torch_threads: Optional[int],
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
        replacement, Dai and Adel 2020; spacy_cner.training.augment), so the model learns contexts, not
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
        [training.before_to_disk]; half the dev F1, BENCHMARKS.md#probabilities), the best path until
        one is fitted or after the weights change. "auto": the fitted threshold where it scored a
        higher dev F1 than the best path when it was fitted (the calibrator compares the two with
        every fit, whatever this setting, and keeps the choice in cfg["threshold_chosen"]), else
        the best path (the faster one). None:
        the best tag sequence (Viterbi), as spaCy's `ner` does.
    alignment_mode (str): A model trained on characters tags a doc of longer tokens (a
        jieba or pkuseg pipeline) on its characters, and maps each entity onto the doc's
        tokens with Doc.char_span in this mode: "expand" (to the tokens it touches),
        "contract" (to the tokens inside it) or "strict" (only exact token boundaries).
        Entities that do not map, or overlap once mapped, are left out and counted in a warning.
    save_weights (str): How the model's weights are saved: "float32"; "float16" (half the size on
        disk, computed in float32 once loaded; not exact: the entities it changes on trained
        pipelines, BENCHMARKS.md#inference); "int8-tables": float16, the
        embedding tables (HashEmbed, KeyEmbed) in int8 with a scale per row, loaded back in float32.
        Kept in the pipe's cfg: set it on a trained pipe (ner.save_weights = "float16") before
        nlp.to_disk or `spacy package`; a transformer's weights are saved in float16 too.
    precision (str): The products at prediction on the CPU: "float32", or "bfloat16" (the BiLSTM's or
        TENER's and the tok2vec's products on bfloat16 copies, each result rounded to bfloat16; backends/precision.py):
        faster on CPUs with AMX or AVX512-BF16, slower elsewhere (it warns), float32 where torch cannot run it
        (no AVX512: it warns), not exact (its speed, F1 and agreement with float32:
        BENCHMARKS.md#inference). Training is unchanged. Kept in the pipe's cfg
        like save_weights; not for a transformer tok2vec (it raises).
    torch_threads (Optional[int]): torch's threads while the pipe predicts (set around each call, the caller's
        put back after): 1 by default, about as fast as more on a free machine and several times faster where
        other processes hold cores (backends/threads.py); None: the process's setting (torch.set_num_threads), for a
        large transformer encoder whose products threads speed up (the transformer configs set it). Kept in
        the pipe's cfg like precision; training runs on the process's setting.
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
        save_weights=save_weights,
        precision=precision,
        torch_threads=torch_threads,
    )
    pipe.pipeline_link = PipelineLink(nlp)
    return pipe


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
        save_weights: str = "float32",
        precision: str = "float32",
        torch_threads: Optional[int] = 1,
    ) -> None:
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.adversarial = adversarial
        # id(example) -> (the example, its gold constraints) while an update runs (see get_loss), else None.
        self._gold_cache: Optional[Dict[int, Tuple[Example, Floats2d]]] = None
        # Updates so far (adversarial.every counts them); not saved.
        self._n_updates = 0
        validate_settings(
            tok2vec_learn_rate_scale=tok2vec_learn_rate_scale,
            long_doc_window=long_doc_window,
            join_examples=join_examples,
            replace_mentions=replace_mentions,
            candidate_threshold=candidate_threshold,
            ents_threshold=ents_threshold,
            alignment_mode=alignment_mode,
        )
        self.long_doc_window = long_doc_window
        self.join_examples = join_examples
        self.replace_mentions = replace_mentions
        # The mentions replace_mentions draws from: those of the examples seen at initialize and in update.
        self._mentions = MentionPool()
        self.spans_key = spans_key
        self.candidate_threshold = candidate_threshold
        self.ents_threshold = ents_threshold
        self._warned_labels: set = set()
        self._warned_unchosen = False
        # Set by the factory and by initialize(nlp=...).
        self.pipeline_link = PipelineLink()
        self.alignment_mode = alignment_mode
        self._uncertainty: Optional[str] = None
        self.uncertainty_seed = 0
        # finish_update() calls in this process, and whether the weights are initialize()'s, never updated:
        # the calibrator (pipeline/calibration.py) fits neither the untrained weights of spaCy's step-0
        # checkpoint nor the same weights twice.
        self.weights_version = 0
        self.untrained = False
        self.cfg: Dict = {
            "labels": [],
            "scheme": validate_scheme(scheme),
            "tok2vec_learn_rate_scale": tok2vec_learn_rate_scale,
            # Entity probabilities are computed with every CRF score divided by it (fit_temperature).
            "temperature": 1.0,
            # The probability doc.ents are decoded at with ents_threshold "fitted" (fit_threshold);
            # None (the best path) until fitted, and again once finish_update() changes the weights.
            "fitted_threshold": None,
            # Whether the fitted threshold beat the best path on dev, for ents_threshold "auto" (set with the
            # threshold by the calibrator, spacy-cner.calibrate.v1); None until then, and after an update.
            "threshold_chosen": None,
            # "char" when the training docs' tokens were single characters (set at initialize).
            "token_unit": None,
            # The train corpus's tokens (set at initialize): the adversarial attack's large-corpus rule reads it.
            "train_tokens": None,
            "save_weights": validate_save_weights(save_weights),
            "precision": check_precision(model, precision, name),
            "torch_threads": check_threads(torch_threads, name),
        }

    @property
    def save_weights(self) -> str:
        """The dtype the model's weights are saved in ("float32" or "float16"; see the factory)."""
        return self.cfg.get("save_weights", "float32")

    @save_weights.setter
    def save_weights(self, value: str) -> None:
        self.cfg["save_weights"] = validate_save_weights(value)

    @property
    def precision(self) -> str:
        """The products' precision at prediction on the CPU ("float32" or "bfloat16"; see the factory)."""
        return self.cfg.get("precision", "float32")

    @precision.setter
    def precision(self, value: str) -> None:
        self.cfg["precision"] = check_precision(self.model, value, self.name)

    # torch's threads while the pipe predicts (None: the process's; see the factory).
    torch_threads = TorchThreadsSetting()

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
        return tok2vec_mix_weights(self.model)

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
            resize_output(self.model, old_tags, self.tag_names)
            self.cfg["label_descriptions"] = {**describe_labels(self.labels), **self.cfg.get("label_descriptions", {})}
        return 1

    @property
    def label_descriptions(self) -> Dict[str, str]:
        """What each label means (spacy_cner.corpus.labels), as spacy.explain and the model card give it."""
        return dict(self.cfg.get("label_descriptions") or describe_labels(self.labels))

    @property
    def uncertainty(self) -> Optional[str]:
        """Active learning: a strategy of spacy_cner.annotate.uncertainty.STRATEGIES that sets
        doc._.uncertainty on every doc (uncertainty_seed seeds the random one); None (the default):
        not computed. A run-time setting (`select` sets it), not saved with the pipe."""
        return getattr(self, "_uncertainty", None)  # a pipe pickled before the setting has none

    @uncertainty.setter
    def uncertainty(self, strategy: Optional[str]) -> None:
        if strategy is not None and strategy not in STRATEGIES:
            raise ValueError(f"Unknown strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}.")
        if strategy in SPAN_STRATEGIES and self.spans_key is None:
            raise ValueError(
                f"The {strategy!r} strategy scores the spans the pipe considers, but {self.name} has "
                'spans_key null and keeps none: set spans_key (e.g. "crf_ner"), or use entropy.'
            )
        self._uncertainty = strategy

    @property
    def entity_threshold(self) -> Optional[float]:
        """The probability doc.ents are decoded at (ents_threshold, or the fitted one), or None:
        the best tag sequence."""
        if self.ents_threshold == "fitted":
            return self.cfg.get("fitted_threshold")
        if self.ents_threshold == "auto":
            self._warn_unchosen()
            threshold, chosen = self.cfg.get("fitted_threshold"), self.cfg.get("threshold_chosen")
            return threshold if chosen else None
        return self.ents_threshold

    def _warn_unchosen(self) -> None:
        """Warn once (at load, or at the first decoding after ents_threshold is set) where ents_threshold
        "auto" has a fitted threshold but no choice between it and the best path."""
        unchosen = self.cfg.get("fitted_threshold") is not None and self.cfg.get("threshold_chosen") is None
        if self.ents_threshold == "auto" and unchosen and not self._warned_unchosen:
            self._warned_unchosen = True
            warnings.warn(
                f"'{self.name}' has ents_threshold \"auto\" and a fitted threshold but no choice between it and "
                'the best path (fitted by fit_threshold alone, or calibrated before "auto" existed): decoding at '
                "the best path. Calibrate it: python -m spacy_cner calibrate MODEL dev.spacy OUTPUT --decoding auto.",
                stacklevel=3,
            )

    def warm_up(self) -> None:
        """Build now what the first doc would otherwise wait for: the lexicon layers' prefix indexes and
        gazetteer types (jieba's 337k words), the softword segmenter's dictionary, and one prediction
        (torch's and numpy's first calls). A server calls it after spacy.load, so that its first request
        is as fast as the others (docs/performance.md); spacy.load leaves it out, for the tools that load a
        pipeline without tagging (package, model-card) and for nlp.pipe's worker processes."""
        warm_up_lexicons(self.model)
        self.predict([Doc(self.vocab, words=["预", "热"], spaces=[False, False])])

    def predict(self, docs: Iterable[Doc]) -> "Tagging":
        """The best tag-id sequence per doc, respecting pre-set entities, and the entity
        probabilities when spans_key or entity_threshold asks for them. Decoding at a threshold
        needs only the probabilities: the best path is then not computed (tag_ids None).

        docs (Iterable[Doc]): The docs to tag.
        RETURNS (Tagging): Tag ids (indices into self.tag_names) and scored spans per doc.
        """
        return self._predict(docs)[0]

    def predict_marginals(self, docs: Iterable[Doc]) -> Tuple["Tagging", List[Floats2d]]:
        """predict's Tagging and, from the same forward-backward pass, each doc's tag marginals:
        P(token t has tag j | doc) (n_tokens, n_tags; over the tokens of the character copy where
        the doc was tagged on one), at the fitted temperature. For active learning (spacy_cner.annotate.select).

        docs (Iterable[Doc]): The docs to tag.
        RETURNS (Tuple[Tagging, List[Floats2d]]): The tagging (for set_annotations) and the marginals.
        """
        return self._predict(docs, marginals=True)

    def _predict(self, docs: Iterable[Doc], marginals: bool = False) -> Tuple["Tagging", Optional[List[Floats2d]]]:
        docs = list(docs)
        if docs:
            self._adopt_vectors(docs[0].vocab)
        # A character model tags a doc of longer tokens on a character copy of it.
        char_docs = [self._char_doc(doc) for doc in docs]
        docs = [char_doc if char_doc is not None else doc for doc, char_doc in zip(docs, char_docs)]
        with torch_threads(self.torch_threads):
            decoded = self._decode(docs, best_path=self.entity_threshold is None)
            return self._tag(docs, decoded, char_docs, marginals)

    def _adopt_vectors(self, vocab: Vocab) -> None:
        """The docs' vocab gets the vectors this pipe's model reads, or other vectors there raise
        (checks.match_vectors: a crf_ner sourced into another pipeline); once per vocab and table."""
        if vocab is self.vocab or getattr(self, "_vectors_matched", None) == (id(vocab), id(vocab.vectors)):
            return
        if reads_vectors(self.model):
            match_vectors(self.vocab, vocab, self.name)
        self._vectors_matched = (id(vocab), id(vocab.vectors))

    def _tag(
        self, docs: List[Doc], decoded: Decoded, char_docs: List[Optional[Doc]], marginals: bool = False
    ) -> Tuple["Tagging", Optional[List[Floats2d]]]:
        """predict's Tagging of decoded docs (each the character copy in char_docs where it has one),
        at the pipe's settings now (threshold, temperature, uncertainty), and their marginals."""
        candidate_threshold = self.candidate_threshold if self.spans_key is not None else None
        temperature = self.cfg.get("temperature", 1.0)
        strategy = self.uncertainty
        tagging, found = tag_docs(
            self.model,
            self.tag_set,
            docs,
            decoded,
            char_docs,
            self.entity_threshold,
            candidate_threshold,
            temperature,
            marginals or strategy not in (None, "random"),
        )
        if strategy is not None:
            span_scores = tagging.scores or [{} for _ in docs]
            seed = getattr(self, "uncertainty_seed", 0)
            tagging.uncertainty = [
                strategy_score(strategy, doc_marginals, doc_scores.values(), doc.text, seed)
                for doc, doc_marginals, doc_scores in zip(docs, found or [None] * len(docs), span_scores)
            ]
        return tagging, found if marginals else None

    def _decode(self, docs: List[Doc], best_path: bool = True) -> Decoded:
        """The docs' segments decoded (decoding.decode) with the pipe's tags and window, their
        emissions in the pipe's precision."""
        return decode_in_precision(
            self.model, docs, self.tag_set, self.long_doc_window, self.precision, self.name, best_path=best_path
        )

    def _span_scores(self, n_docs: int, decoded: Decoded, threshold: float, temperature: float) -> List[SpanScores]:
        """The scored spans of the decoded docs (decoding.span_scores)."""
        return span_scores(self.model, self.tag_set, n_docs, decoded, threshold, temperature)

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
        for doc, value in zip(docs, tagging.uncertainty or ()):
            doc._.uncertainty = value
        for doc, ids, doc_scores, char_doc in zip(docs, tag_ids, scores, char_docs):
            found, doc_scores, lost = doc_entities(
                self.model.ops, doc, ids, doc_scores, char_doc, tag_names, labels, ents_threshold, self.alignment_mode
            )
            n_unaligned += lost
            set_doc_entities(doc, found, doc_scores, labels, self.spans_key, self.candidate_threshold)
        warn_unaligned(n_unaligned, self.name, self.alignment_mode)

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
        to that layer (spacy_cner.layers.entity_attention).

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
        self._adopt_vectors(examples[0].predicted.vocab)
        warn_unknown_labels(examples, self.labels, self._warned_labels, self.name)
        if self.replace_mentions:
            self._mentions.add(examples)
            examples = self._mentions.replace(examples, self.replace_mentions)
        if self.join_examples:
            examples = join_pairs(examples, self.join_examples)
        set_dropout_rate(self.model, drop)
        docs = [eg.predicted for eg in examples]
        # Layers with an entity-label enhancement read the gold entities beside the docs.
        X = (docs, [example_entity_ids(eg) for eg in examples]) if uses_gold_entities(self.model, self.name) else docs
        self._gold_cache = {}
        # Products in one piece (backends.rowwise_ops.training_products): a step compares nothing across batches.

        def step(indices: Optional[List[int]] = None) -> float:
            # indices: the examples of the pass (None: all), its loss and gradients scaled to the batch's.
            egs = examples if indices is None else [examples[i] for i in indices]
            x = X if indices is None else _take(X, indices)
            emissions, backprop = self.model.begin_update(x)
            if indices is None:
                loss, d_emissions = self.get_loss(egs, emissions)
            else:
                loss, d_emissions = self.get_loss(egs, emissions, scale=len(examples) / len(indices))
            backprop(d_emissions)
            return loss

        try:
            with training_products():
                loss = step()
                update_index = getattr(self, "_n_updates", 0)  # a pipe pickled before the counter has none
                attack = self.adversarial
                if attack is not None and attack.applies(update_index, attack.every_for(self.cfg.get("train_tokens"))):
                    key = f"{self.name}_adversarial"
                    attacked = attack.attacked(len(examples))
                    losses[key] = losses.get(key, 0.0) + attack.attack(self.model, lambda: step(attacked))
        finally:
            self._gold_cache = None
            self._n_updates = getattr(self, "_n_updates", 0) + 1
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def rehearse(
        self,
        examples: Iterable[Example],
        *,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
        **config: Any,
    ) -> Dict[str, float]:
        """Not implemented: raises, where spaCy's TrainablePipe would silently do nothing."""
        raise NotImplementedError(
            f"'{self.name}' (crf_ner) does not implement rehearse (spaCy's pseudo-rehearsal). To keep what the "
            "pipeline knew while training on new data, add texts it annotated (nlp.pipe, or python -m spacy_cner "
            f"annotate) to the new examples and call nlp.update, or pass exclude=[{self.name!r}] to nlp.rehearse."
        )

    def finish_update(self, sgd: Optimizer) -> None:
        """Update the weights, the tok2vec's at tok2vec_learn_rate_scale times the optimizer's rate
        (except a lexicon adapter's inside the tok2vec: new weights, the full rate).

        sgd (Optimizer): The optimizer.
        """
        # A threshold fitted on the old weights no longer holds (nor shows in dev scores).
        self.cfg["fitted_threshold"] = None
        self.cfg["threshold_chosen"] = None
        apply_gradients(self.model, sgd, self.cfg.get("tok2vec_learn_rate_scale", 1.0))
        self.weights_version += 1
        self.untrained = False

    def get_loss(
        self, examples: Iterable[Example], scores: List[Floats2d], *, scale: float = 1.0
    ) -> Tuple[float, List[Floats2d]]:
        """The CRF negative log-likelihood of the gold tags and its gradient.

        Tokens whose gold tag is missing are marginalised over. The CRF's own
        transition gradients are accumulated too, for the next finish_update. An example whose
        predicted doc carries a teacher's soft targets (distillation, spacy_cner.training.distill)
        adds get_teacher_student_loss (the KL of the pipe's CRF from the teacher's), its gold term
        weighted by targets.gold_weight: spaCy v3's training loop calls update and so get_loss, and a
        distillation corpus gives the teacher's side as data.

        examples (Iterable[Example]): The gold examples, none empty.
        scores (List[Floats2d]): The emission scores from the model.
        scale (float): The loss, d_scores and the transition gradients times this (an adversarial
            pass over a share of the batch standing for the whole batch).
        RETURNS (Tuple[float, List[Floats2d]]): The loss and d_scores.
        """
        examples = list(examples)
        validate_examples(examples, "CRFEntityRecognizer.get_loss")
        targets = soft_targets(examples, self.tag_names)
        if targets is not None:
            return self._distillation_loss(examples, scores, targets, scale)
        return self._gold_loss(examples, scores, scale)

    def _distillation_loss(
        self, examples: List[Example], scores: List[Floats2d], targets: List[Any], scale: float
    ) -> Tuple[float, List[Floats2d]]:
        """get_loss of a batch with soft targets: the teacher-student KL of the examples that have them, plus
        the gold negative log-likelihood at each one's gold_weight (1 for those without)."""
        xp = self.model.ops.xp
        taught = [i for i, t in enumerate(targets) if t is not None]
        loss, d_taught = self.get_teacher_student_loss(
            [targets[i] for i in taught], [scores[i] for i in taught], scale=scale
        )
        d_scores = [xp.zeros_like(doc_scores) for doc_scores in scores]
        for i, d in zip(taught, d_taught):
            d_scores[i] = d
        weights = [1.0 if t is None else t.gold_weight for t in targets]
        gold = [i for i, weight in enumerate(weights) if weight > 0]
        if gold:
            gold_loss, d_gold = self._gold_loss(
                [examples[i] for i in gold],
                [scores[i] for i in gold],
                scale,
                xp.asarray([weights[i] for i in gold], dtype="f"),
            )
            loss += gold_loss
            for i, d in zip(gold, d_gold):
                d_scores[i] = d_scores[i] + d
        return loss, d_scores

    def get_teacher_student_loss(
        self, teacher_scores: List[SoftTargets], student_scores: List[Floats2d], *, scale: float = 1.0
    ) -> Tuple[float, List[Floats2d]]:
        """The loss of the student's scores relative to the teacher's and its gradient, as spaCy v4's
        TrainablePipe.get_teacher_student_loss(teacher_scores, student_scores): here T^2 KL(teacher ||
        student) over whole tag sequences at the teacher's temperature (training.distill.loss).

        Where it differs from v4's: the teacher's side is its soft targets (the tag marginals, expected
        transition counts and entropy of its CRF, computed once by the teacher pass and read from the
        distillation corpus), not scores from running the teacher's model in the same step (v4's
        `distill`); the CRF's start, transition and end gradients are accumulated too, for the next
        finish_update; and scale stands for an adversarial pass over a share of the batch, as get_loss's.

        teacher_scores (List[SoftTargets]): Per doc, the teacher's soft targets in this pipe's tag order.
        student_scores (List[Floats2d]): Per doc, this pipe's emission scores, none empty.
        scale (float): The loss, d_scores and the transition gradients times this.
        RETURNS (Tuple[float, List[Floats2d]]): The loss and d_scores.
        """
        losses, d_scores = teacher_student_loss(self.model.get_ref("crf"), student_scores, teacher_scores, scale=scale)
        return float(losses.sum()), d_scores

    def _gold_loss(
        self, examples: List[Example], scores: List[Floats2d], scale: float, weights: Optional[Floats1d] = None
    ) -> Tuple[float, List[Floats2d]]:
        """The negative log-likelihood of the gold tags times scale (and each example's times its weight)
        and d_scores."""
        # Within an update, the adversarial pass scores the same examples (or some of them) again:
        # reuse their constraints (the cache holds the examples, so their ids stay theirs).
        cache = self._gold_cache if self._gold_cache is not None else {}
        allowed = []
        for eg in examples:
            if id(eg) not in cache:
                cache[id(eg)] = (eg, self.model.ops.asarray2f(gold_constraints(aligned_ner(eg), self.tag_set)))
            allowed.append(cache[id(eg)][1])
        crf = self.model.get_ref("crf")
        log_likelihood, backprop = crf.begin_update((scores, allowed))
        if weights is None:
            d_scores, _ = backprop(-scale * self.model.ops.xp.ones_like(log_likelihood))
            return float(-log_likelihood.sum()) * scale, d_scores
        d_scores, _ = backprop(-scale * weights)
        return float(-(log_likelihood * weights).sum()) * scale, d_scores

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Sequence[str]] = None,
        lexicon: Optional[Lexicon] = None,
        label_descriptions: Optional[Dict[str, str]] = None,
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
        label_descriptions (Optional[Dict[str, str]]): What each label means, for spacy.explain
            and the model card; the meanings of the dataset the labels come from (labels.DATASET_LABELS)
            fill in the others.
        """
        validate_get_examples(_first_examples(get_examples), "CRFEntityRecognizer.initialize")
        if nlp is not None:
            self.pipeline_link = PipelineLink(nlp)
            check_vectors(nlp, self.name)
        if labels is None and not self.labels:
            labels = sorted({ent.label_ for eg in get_examples() for ent in eg.reference.ents})
        for label in labels or ():
            self.add_label(label)
        if self.replace_mentions:
            self._mentions.add(get_examples())
        check_labels(self.labels, self.name)
        set_model_lexicon(self.model, lexicon, self.name)
        # The first ten non-empty docs, without reading the rest of the corpus.
        doc_sample = list(itertools.islice((eg.predicted for eg in get_examples() if len(eg.predicted)), INIT_SAMPLE))
        if not doc_sample:
            raise ValueError(f"'{self.name}' needs at least one non-empty training doc to initialize.")
        self.cfg["token_unit"] = token_unit(doc_sample)
        # The train corpus's size is for the adversarial attack's large-corpus rule only: without an attack
        # the corpus is not read for it (a distilled student's corpus of millions of characters and soft
        # targets took minutes a pass).
        if self.adversarial is not None:
            self.cfg["train_tokens"] = sum(len(eg.reference) for eg in get_examples())
        self._log_adversarial_every()
        # Exact bigram tables (CharBigramEmbed.v2, bigram_rows null): a row per bigram of the corpus.
        rows = size_key_tables(self.model, (eg.predicted for eg in get_examples()))
        if rows:
            msg.info(
                f"{self.name}: exact bigram tables of {' and '.join(f'{n:,}' for n in rows.values())} rows "
                "(the train corpus's bigrams, and one unknown row)"
            )
        self.model.initialize(X=doc_sample, Y=self.tag_names)
        self.untrained = True
        self.cfg["label_descriptions"] = describe_labels(self.labels, label_descriptions)
        explain_labels(self.cfg["label_descriptions"])

    def _log_adversarial_every(self) -> None:
        """Say where the adversarial attack's large-corpus rule applies to the train corpus."""
        attack, tokens = self.adversarial, self.cfg.get("train_tokens")
        if attack is not None and attack.every_for(tokens) != attack.every:
            msg.info(
                f"{self.name}: train corpus of {tokens:,} tokens (over {attack.large_corpus:,}): "
                f"{attack.method.upper()} at every {attack.every_for(tokens)} updates (not {attack.every})"
            )

    def fit_temperature(self, examples: Iterable[Example], *, outcomes: Optional[Outcomes] = None) -> Dict[str, float]:
        """Fit the temperature of the entity probabilities on held-out examples (dev) and keep it in
        cfg["temperature"], saved with the pipe (calibration.fit_temperature: the least log loss of
        the predicted entities' probabilities); the predicted entities themselves do not change.

        examples (Iterable[Example]): Held-out gold examples; their predicted docs are tagged.
        outcomes (Optional[Outcomes]): entity_outcomes(examples), when the caller has it (one
            decoding for fit_temperature and fit_threshold).
        RETURNS (Dict[str, float]): temperature, n_entities, and log loss and ECE before and after.
        """
        fit = calibration.fit_temperature(outcomes if outcomes is not None else self.entity_outcomes(examples))
        self.cfg["temperature"] = fit["temperature"]
        return fit

    def fit_threshold(self, examples: Iterable[Example], *, outcomes: Optional[Outcomes] = None) -> Dict[str, float]:
        """Fit the probability doc.ents are decoded at (ents_threshold "fitted") on held-out
        examples (dev), and keep it in cfg["fitted_threshold"] (calibration.fit_threshold: half
        the best-path F1, at least 0.1).

        examples (Iterable[Example]): Held-out gold examples; their predicted docs are tagged.
        outcomes (Optional[Outcomes]): entity_outcomes(examples), when the caller has it.
        RETURNS (Dict[str, float]): threshold, and f1 of the best path on the examples.
        """
        examples = list(examples)
        _, right = (outcomes or self.entity_outcomes(examples))(self.cfg.get("temperature", 1.0))
        fit = calibration.fit_threshold(right, sum(len(eg.get_aligned_spans_y2x(eg.reference.ents)) for eg in examples))
        self.cfg["fitted_threshold"] = fit["threshold"]
        self.cfg["threshold_chosen"] = None  # the calibrator chooses for the new threshold
        return fit

    def entity_outcomes(self, examples: Iterable[Example]) -> Outcomes:
        """Tag the examples' predicted docs once; the returned function gives, at a temperature,
        each predicted entity's probability and whether it is right (1.0: an exact match of a
        gold entity), for calibration (calibration.decode_dev and dev_outcomes).

        examples (Iterable[Example]): Gold examples.
        RETURNS (Outcomes): temperature -> (probabilities, right).
        """
        decoding = calibration.decode_dev(
            self.model,
            self.tag_set,
            list(examples),
            self.long_doc_window,
            self.precision,
            self.name,
            self.cfg.get("token_unit"),
        )
        return calibration.dev_outcomes(self.model, self.tag_set, decoding)

    def _pipeline(self) -> Language:
        """The pipeline this pipe was created or initialized in (robustness.PipelineLink); a pipe
        pickled before pipeline_link existed has none."""
        return PipelineLink.pipeline_of(self, getattr(self, "pipeline_link", None))

    def _char_doc(self, doc: Doc) -> Optional[Doc]:
        """A character copy of the doc when the model was trained on characters and the doc has
        longer tokens (alignment.character_copy); else None."""
        return character_copy(doc) if self.cfg.get("token_unit") == "char" else None

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        """Serialize the pipe: cfg (recording the learned scalar mix, for reading without
        loading), vocab, model and, for a model with lexicon layers (adapters, soft lexicons),
        "lexicon": their lexicons."""
        return util.to_bytes(bytes_writers(self.model, self.cfg, self.vocab, exclude), exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "CRFEntityRecognizer":
        """Load the pipe, and the lexicons of its lexicon layers."""
        util.from_bytes(bytes_data, bytes_readers(self.model, self.cfg, self.vocab, self.name, exclude), exclude)
        self._check_loaded("the cfg in the bytes")
        return self

    def to_disk(self, path, *, exclude=tuple()) -> None:
        """Save the pipe (see to_bytes); the lexicons in the file "lexicon"."""
        util.to_disk(path, file_writers(self.model, self.cfg, self.vocab, exclude), exclude)

    def from_disk(self, path, *, exclude=tuple()) -> "CRFEntityRecognizer":
        """Load the pipe, and the lexicons of its lexicon layers."""
        util.from_disk(path, file_readers(self.model, self.cfg, self.vocab, self.name, exclude), exclude)
        self._check_loaded(str(Path(path) / "cfg"))
        return self

    def _check_loaded(self, cfg_source: str) -> None:
        """The loaded cfg fits the model's tags, its calibration values are possible and its precision
        can run here (check_precision: a bfloat16 pipeline loaded on a CPU without native bfloat16 warns).
        Loaded weights are new weights for the calibrator (weights_version)."""
        self.untrained = False
        self.weights_version += 1
        self._warn_unchosen()
        check_tag_names(self.model, self.cfg, self.tag_names, cfg_source, self.name)
        check_calibration(self.cfg, cfg_source, self.name)
        check_precision(self.model, self.precision, self.name)
        explain_labels(self.label_descriptions)


def _take(X: Any, indices: List[int]) -> Any:
    """The examples at indices of the model's input: docs, or (docs, gold entity ids)."""
    if isinstance(X, tuple):
        return tuple([part[i] for i in indices] for part in X)
    return [X[i] for i in indices]
