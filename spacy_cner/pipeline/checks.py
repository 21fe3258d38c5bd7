"""Guards of the `crf_ner` pipe: settings and saved files it cannot use raise, saying what to do."""

import math
import warnings
from collections import Counter
from typing import Any, Dict, List, Sequence, Set, Union

from spacy.language import Language
from spacy.training import Example
from spacy.vocab import Vocab
from thinc.api import Model

from ..layers.entity_attention import gold_layers_out_of_reach, takes_gold
from ..backends.precision import validate_precision, warn_where_slower
from ..layers._torch import torch_module

# The least probability a span is scored at (candidate_threshold, ents_threshold): the spans at least
# that probable number at most len(doc) / threshold per label (layers/crf.py _Lattice.candidates).
MIN_SPAN_PROBABILITY = 0.001


def check_vectors(nlp: Language, name: str) -> None:
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
        f"'{name}' has no static-vectors layer, so they would be ignored. Set static_vectors "
        "= true in spacy-cner.CharBigramEmbed.v1 (character and bigram vectors), use another "
        "tok2vec that reads them (spacy.MultiHashEmbed.v2 with include_static_vectors = true), "
        "or set paths.vectors = null."
    )


def match_vectors(own: Vocab, vocab: Vocab, name: str) -> None:
    """Give the docs' vocab the vectors the pipe's model reads, or refuse other ones: a crf_ner sourced into
    another pipeline (nlp.add_pipe("crf_ner", source=trained)) keeps the trained pipeline's vocab, whose vectors
    spaCy does not copy. A vocab without vectors gets them (a warning; the pipeline then saves them); one with
    other vectors raises, even of the same width, where the model would read other rows than it was trained
    with and tag other entities (spaCy warns only, W113), and the pipeline saved would not load.

    own (Vocab): The pipe's own vocab (the trained pipeline's).
    vocab (Vocab): The docs' vocab (the pipeline's).
    name (str): The pipe's name, for the messages.
    """
    if not own.vectors.shape[0] or vocab.vectors is own.vectors:
        return
    if not vocab.vectors.shape[0]:
        vocab.vectors = own.vectors
        warnings.warn(
            f"'{name}' reads static vectors that this pipeline's vocab did not have (a component sourced from "
            f"another pipeline): they were copied into it ({own.vectors.shape[0]:,} rows), so that it tags "
            "and saves with them.",
            stacklevel=4,
        )
    elif vocab.vectors != own.vectors:  # spaCy's comparison (W113): shape, keys, table
        raise ValueError(
            f"'{name}' was trained with other vectors ({own.vectors.n_keys:,} keys of shape {own.vectors.shape}) "
            f"than this pipeline's vocab has ({vocab.vectors.n_keys:,} keys of shape {vocab.vectors.shape}): its "
            "model would read other rows and tag other entities, and the pipeline saved would not load. Give the "
            "pipeline the trained one's vectors (nlp.vocab.vectors = trained.vocab.vectors; in a config, "
            "[initialize] vectors = the trained pipeline), source the component into a pipeline without vectors "
            "(it brings its own), or train a new crf_ner on these vectors."
        )


def check_precision(model: Model, precision: str, name: str) -> str:
    """The pipe's precision setting, validated: "bfloat16" raises for a model with a transformer (its
    products are not the ones backends.precision rounds; on a GPU, set the transformer's
    mixed_precision instead) and warns on a CPU that has no native bfloat16 products, or cannot run
    them (it predicts in float32 there)."""
    validate_precision(precision)
    if precision != "float32":
        if any(node.maybe_get_ref("transformer") is not None for node in model.walk()):
            raise ValueError(
                f"'{name}': precision {precision!r} is for the CPU models (the BiLSTM and TENER encoders and "
                "the tok2vec's products), not for a transformer tok2vec. Keep precision 'float32'; on a GPU, "
                "set the transformer's mixed_precision = true instead."
            )
        warn_where_slower(precision, name)
    return precision


def uses_gold_entities(model: Model, name: str) -> bool:
    """Whether the model reads gold entities in training: a CRF tagger whose tok2vec or encoder
    has an entity-label enhancement (entity_attention_scale > 0). An enhanced layer anywhere
    else (another architecture, or moved deeper, e.g. by replace_listeners) would never get
    them, so it raises instead of training without them."""
    # Only CRFTagger.v1 hands gold entities on, and only to its tok2vec and encoder.
    is_tagger = model.name == "crf_tagger"
    fed = [model.maybe_get_ref("tok2vec"), model.maybe_get_ref("encoder")] if is_tagger else []
    unfed = gold_layers_out_of_reach([model], fed)
    if unfed and not is_tagger:
        raise ValueError(
            f"'{name}' has a layer with an entity_attention_scale ({unfed[0].name}) in a "
            f"'{model.name}' model: only spacy-cner.CRFTagger.v1 hands it the gold entities. "
            "Use that architecture, or set entity_attention_scale to 0."
        )
    if unfed:
        raise ValueError(
            f"'{name}' has a layer with an entity_attention_scale ({unfed[0].name}) inside its "
            "tok2vec or encoder, where the CRF tagger cannot hand it the gold entities: make it "
            "the tagger's tok2vec or encoder itself, or set its entity_attention_scale to 0."
        )
    return any(layer is not None and takes_gold(layer) for layer in fed)


def check_calibration(cfg: Dict[str, Any], cfg_source: str, name: str) -> None:
    """Raise if a loaded cfg's temperature, fitted threshold or threshold choice cannot be what fitting stored."""
    checks = (
        ("temperature", lambda v: v > 0, "a finite number above 0"),
        ("fitted_threshold", lambda v: MIN_SPAN_PROBABILITY <= v <= 1, f"a probability in [{MIN_SPAN_PROBABILITY}, 1]"),
    )
    for key, valid, expected in checks:
        value = cfg.get(key)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not valid(value)
        ):
            raise ValueError(
                f"{cfg_source} of '{name}' has {key} = {value!r}: expected {expected} (or null). "
                "Restore the cfg saved with the model, or set it to null and refit it on dev "
                "(the pipe's fit_temperature and fit_threshold)."
            )
    chosen = cfg.get("threshold_chosen")
    if chosen is not None and not isinstance(chosen, bool):  # "false" would be true: decoded at the threshold
        raise ValueError(
            f"{cfg_source} of '{name}' has threshold_chosen = {chosen!r}: expected true or false (or null), whether "
            "the fitted threshold beat the best path on dev. Restore the cfg saved with the model, or set it to "
            "null and calibrate again (spacy-cner.calibrate.v1)."
        )


def check_tag_names(model: Model, cfg: Dict[str, Any], tag_names: List[str], cfg_source: str, name: str) -> None:
    """Raise if a loaded cfg's labels and scheme name other tags than the CRF was trained with."""
    trained = torch_module(model.get_ref("crf")).tag_names
    if trained and trained != tag_names:
        raise ValueError(
            f"{cfg_source} of '{name}' gives labels {list(cfg['labels'])} with scheme "
            f"{cfg['scheme']}, i.e. tags {tag_names}, but its model was trained with "
            f"the tags {trained}: the cfg and the weights do not belong together. Restore the "
            "cfg saved with the model (or retrain)."
        )


def validate_settings(
    *,
    tok2vec_learn_rate_scale: float,
    long_doc_window: int,
    join_examples: float,
    replace_mentions: float,
    candidate_threshold: float,
    ents_threshold: Union[float, str, None],
    alignment_mode: str,
) -> None:
    """Raise, naming the setting and its accepted values, if a crf_ner setting is out of range."""
    if not tok2vec_learn_rate_scale > 0:
        raise ValueError(f"tok2vec_learn_rate_scale must be positive, got {tok2vec_learn_rate_scale}.")
    if long_doc_window != 0 and long_doc_window < 2:
        raise ValueError(f"long_doc_window must be 0 (off) or at least 2 tokens, got {long_doc_window}.")
    if not 0.0 <= join_examples <= 1.0:
        raise ValueError(f"join_examples is a share of each batch, from 0 to 1, got {join_examples}.")
    if not 0.0 <= replace_mentions <= 1.0:
        raise ValueError(f"replace_mentions is a probability, from 0 to 1, got {replace_mentions}.")
    if not candidate_threshold >= MIN_SPAN_PROBABILITY:
        raise ValueError(
            f"candidate_threshold must be at least {MIN_SPAN_PROBABILITY} (above 1 for no alternatives), got "
            f"{candidate_threshold}: a doc of n tokens can have up to n / threshold spans that probable."
        )
    numeric = not isinstance(ents_threshold, str) and ents_threshold is not None
    if not (ents_threshold in (None, "fitted", "auto") or (numeric and MIN_SPAN_PROBABILITY <= ents_threshold <= 1.0)):
        raise ValueError(
            f"ents_threshold is a probability (from {MIN_SPAN_PROBABILITY} to 1; a doc of n tokens can have up to "
            f'n / threshold spans that probable), "fitted", "auto" or None; got {ents_threshold!r}.'
        )
    if alignment_mode not in ("strict", "contract", "expand"):
        raise ValueError(f"alignment_mode must be 'strict', 'contract' or 'expand', got {alignment_mode!r}.")


def warn_unknown_labels(examples: Sequence[Example], labels: Sequence[str], warned: Set[str], name: str) -> None:
    """Warn, once per label (warned: the labels warned about so far, updated), about gold entities
    whose label the pipe does not predict."""
    known = set(labels)
    unknown = Counter(ent.label_ for eg in examples for ent in eg.reference.ents if ent.label_ not in known)
    new = {label: count for label, count in unknown.items() if label not in warned}
    if new:
        counts = ", ".join(f"{label} ({count})" for label, count in sorted(new.items()))
        warnings.warn(
            f"'{name}' does not predict the labels of some gold entities in this batch: {counts}. "
            "Their tokens are left out of the loss, as unannotated ones. Add the labels before "
            "initialize ([initialize.components] labels, or add_label), or remove them from the data.",
            stacklevel=2,
        )
        warned.update(new)


def warn_unaligned(n_unaligned: int, name: str, alignment_mode: str) -> None:
    """Warn that entities found on a character copy did not map onto the docs' tokens."""
    if n_unaligned:
        warnings.warn(
            f"'{name}' tags characters; {n_unaligned} entities found in this batch did not map onto "
            f"the docs' tokens (alignment_mode '{alignment_mode}') or overlapped once mapped, and were "
            'left out. Use a character tokenizer (spacy-cner.ChineseTokenizer.v1, segmenter "char") or '
            'alignment_mode "expand".',
            stacklevel=3,
        )


def check_labels(labels: Sequence[str], name: str) -> None:
    """Raise unless initialize found or was given labels."""
    if not labels:
        raise ValueError(
            f"'{name}' has no labels: the training examples hold no entities and "
            "none were given. Check the corpus, or set [initialize.components."
            f"{name}.labels]."
        )
