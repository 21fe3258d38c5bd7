"""Tag schemes, span <-> tag conversion and the transitions a CRF may take."""

from dataclasses import dataclass
from functools import cached_property
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.attrs import ENT_IOB, IS_SPACE, ORTH, SENT_START, SPACY
from spacy.tokens import Doc
from spacy.training import Example

# The one tag-scheme vocabulary: every scheme a corpus file may be tagged in, with the prefixes it
# allows besides "O" (the opening prefix first, the continuation second) and its name in messages.
SCHEME_PREFIXES: Dict[str, Tuple[str, ...]] = {
    "bio": ("B", "I"),
    "iob": ("B", "I"),
    "bmes": ("B", "M", "E", "S"),
    "bioes": ("B", "I", "E", "S"),
}
SCHEME_NAMES = {"bio": "BIO (IOB2)", "iob": "IOB (IOB1)", "bmes": "BMES", "bioes": "BIOES"}
# What `convert` reads ("auto" detects it), what `export` writes, and what crf_ner tags in.
INPUT_SCHEMES = ("auto", "bio", "iob", "bmes", "bioes")
EXPORT_SCHEMES = ("bioes", "bio", "bmes")
SCHEMES = ("BIOES", "BIO")
OUT = "O"
# Prefixes that continue an entity opened by an earlier token.
CONTINUE_PREFIXES = ("I", "E")
# spaCy's BILUO prefixes in each scheme (Example.get_aligned_ner speaks BILUO).
_FROM_BILUO = {
    "BIOES": {"B": "B", "I": "I", "L": "E", "U": "S"},
    "BIO": {"B": "B", "I": "I", "L": "I", "U": "B"},
}
_PREFIXES = {scheme: SCHEME_PREFIXES[scheme.lower()] for scheme in SCHEMES}

# (start, end exclusive, label): token offsets (here, crf_ner, convert) or character offsets
# (robustness), as spaCy's Span(doc, start, end, label) and Doc.char_span take them.
Entity = Tuple[int, int, str]


def validate_scheme(scheme: str) -> str:
    """Return the scheme in upper case or raise naming the accepted ones."""
    upper = scheme.upper()
    if upper not in SCHEMES:
        raise ValueError(
            f"Unknown tag scheme {scheme!r}: expected one of {', '.join(SCHEMES)}. "
            "Set it with the crf_ner component's `scheme` setting."
        )
    return upper


@dataclass(frozen=True)
class TagSet:
    """The tags of a scheme over labels: the one place where tag names are made and read back.

    names: "O", then each label's prefixes, in label order (["O", "B-LOC", "I-LOC", ...]).
    index: tag name -> column; columns: prefix -> the columns of that prefix, in label order.
    """

    labels: Tuple[str, ...]
    scheme: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(self.labels))
        object.__setattr__(self, "scheme", validate_scheme(self.scheme))

    @classmethod
    def from_names(cls, tag_names: Sequence[str], scheme: Optional[str] = None) -> "TagSet":
        """The tag set whose names these are (a CRF keeps only the names), or a ValueError.

        scheme: the scheme the names must be in; None reads it from the names: a tag set
        without E- or S- tags is BIO (so is one without labels, whose only tag is "O", which
        is why callers that know their scheme pass it).
        """
        parsed = [split_tag(tag) for tag in tag_names if tag != OUT]
        labels = tuple(dict.fromkeys(label for _, label in parsed))
        if scheme is None:
            scheme = "BIOES" if any(prefix in ("E", "S") for prefix, _ in parsed) else "BIO"
        tag_set = cls(labels, scheme)
        if tag_set.names != list(tag_names):
            raise ValueError(
                f"Tags {list(tag_names)[:12]} are not the tags of a scheme: expected 'O' first, then "
                f"each label's {'/'.join(_PREFIXES[tag_set.scheme])} tags, such as "
                f"{tag_set.names[: 1 + len(_PREFIXES[tag_set.scheme])]}."
            )
        return tag_set

    @cached_property
    def names(self) -> List[str]:
        return [OUT] + [f"{prefix}-{label}" for label in self.labels for prefix in _PREFIXES[self.scheme]]

    @cached_property
    def index(self) -> Dict[str, int]:
        return {tag: i for i, tag in enumerate(self.names)}

    @cached_property
    def columns(self) -> Dict[str, numpy.ndarray]:
        index = self.index
        return {
            p: numpy.asarray([index[f"{p}-{label}"] for label in self.labels], dtype="i")
            for p in _PREFIXES[self.scheme]
        }


def get_tag_names(labels: Iterable[str], scheme: str) -> List[str]:
    """The tag names of a scheme, "O" first, then each label's prefixes.

    labels (Iterable[str]): The entity labels, in output order.
    scheme (str): "BIOES" or "BIO".
    RETURNS (List[str]): Tag names such as ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"].
    """
    return list(TagSet(tuple(labels), scheme).names)


def split_tag(tag: str) -> Tuple[str, str]:
    """Split "B-LOC" into ("B", "LOC"); "O" gives ("O", "")."""
    if tag == OUT:
        return OUT, ""
    prefix, sep, label = tag.partition("-")
    if not sep or not label:
        raise ValueError(f"Invalid tag {tag!r}: expected 'O' or PREFIX-LABEL such as 'B-LOC'.")
    return prefix, label


def biluo_to_tags(biluo: Sequence[Optional[str]], scheme: str) -> List[Optional[str]]:
    """Map spaCy's BILUO tags to a scheme; missing values ("-", "", None) stay None.

    One table for both schemes (_FROM_BILUO); spaCy's biluo_to_iob covers BIO only and
    keeps "-" as it is.

    biluo (Sequence[Optional[str]]): Tags as from Example.get_aligned_ner().
    scheme (str): "BIOES" or "BIO".
    RETURNS (List[Optional[str]]): The tags in the scheme, None where unknown.
    """
    mapping = _FROM_BILUO[validate_scheme(scheme)]
    tags: List[Optional[str]] = []
    for tag in biluo:
        if not tag or tag == "-":
            tags.append(None)
        elif tag == OUT:
            tags.append(OUT)
        else:
            prefix, label = split_tag(tag)
            tags.append(f"{mapping[prefix]}-{label}")
    return tags


def spans_to_tags(spans: Iterable[Entity], length: int, scheme: str) -> List[str]:
    """Encode non-overlapping (start, end, label) token spans as tags.

    spans (Iterable[Tuple[int, int, str]]): Token offsets, end exclusive.
    length (int): The number of tokens.
    scheme (str): "BIOES" or "BIO".
    RETURNS (List[str]): One tag per token.
    """
    scheme = validate_scheme(scheme)
    tags = [OUT] * length
    for start, end, label in spans:
        if not 0 <= start < end <= length:
            raise ValueError(f"Span ({start}, {end}) is outside a sequence of {length} tokens.")
        if any(tag != OUT for tag in tags[start:end]):
            raise ValueError(f"Span ({start}, {end}, {label!r}) overlaps another span.")
        if scheme == "BIOES" and end - start == 1:
            tags[start] = f"S-{label}"
            continue
        tags[start] = f"B-{label}"
        for i in range(start + 1, end):
            tags[i] = f"I-{label}"
        if scheme == "BIOES":
            tags[end - 1] = f"E-{label}"
    return tags


def tags_to_spans(tags: Sequence[str]) -> List[Entity]:
    """Decode BIOES or BIO tags into (start, end, label) token spans.

    A continuation tag with no matching opener starts a new span, so an
    ill-formed sequence loses no entity.

    tags (Sequence[str]): One tag per token.
    RETURNS (List[Tuple[int, int, str]]): Spans, end exclusive, in order.
    """
    spans: List[Entity] = []
    start, label = -1, ""
    for i, tag in enumerate(tags):
        if tag == OUT and start < 0:
            continue  # most tokens: nothing to close or open
        prefix, tag_label = split_tag(tag)
        continues = prefix in CONTINUE_PREFIXES and start >= 0 and tag_label == label
        if not continues and start >= 0:
            spans.append((start, i, label))
            start = -1
        if prefix == OUT:
            continue
        if not continues:
            start, label = i, tag_label
        if prefix in ("E", "S"):
            spans.append((start, i + 1, label))
            start = -1
    if start >= 0:
        spans.append((start, len(tags), label))
    return spans


def most_probable_spans(
    probabilities: Dict[Entity, float], threshold: float, required: Iterable[Entity] = ()
) -> List[Entity]:
    """Entities by their probabilities (posterior decoding): the spans at or above threshold,
    most probable first, each kept unless it overlaps one already kept.

    The Viterbi path is the most probable tag sequence; F1 rewards each entity on its own, and
    a span whose probability is below 1/2 but above half the achievable F1 is worth predicting
    (Lipton et al. 2014): the threshold trades precision for recall, which the best path cannot.
    Two overlapping spans exclude each other, so at most one of them is above 1/2; below 1/2 the
    greedy order decides. Ties go to the earlier, then shorter span, so the result is the same on
    every run.

    probabilities (Dict[Tuple[int, int, str], float]): (start, end, label) -> probability.
    threshold (float): The least probability of a kept span.
    required (Iterable[Tuple[int, int, str]]): Spans kept first whatever their probability
        (entities set before the pipe).
    RETURNS (List[Tuple[int, int, str]]): Non-overlapping spans, in order.
    """
    required = list(required)
    ranked = sorted(
        (span for span, p in probabilities.items() if p >= threshold),
        key=lambda span: (-probabilities[span], span[0], span[1], span[2]),
    )
    taken = numpy.zeros(max((span[1] for span in [*required, *ranked]), default=0), dtype=bool)
    kept: List[Entity] = []
    for span in [*required, *ranked]:
        if not taken[span[0] : span[1]].any():
            taken[span[0] : span[1]] = True
            kept.append(span)
    return sorted(kept)


def allowed_transitions(
    tag_names: Sequence[str],
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Which tags may start, follow one another and end a sequence.

    tag_names (Sequence[str]): The tag names of a scheme (TagSet.names) in output order.
    RETURNS (Tuple[ndarray, ndarray, ndarray]): Boolean masks: start (n,),
        transitions (n, n) indexed [from, to], and end (n,).
    """
    tag_set = TagSet.from_names(tag_names)
    bioes = tag_set.scheme == "BIOES"
    parsed = [split_tag(tag) for tag in tag_set.names]
    n_tags = len(parsed)
    start = numpy.zeros((n_tags,), dtype=bool)
    end = numpy.zeros((n_tags,), dtype=bool)
    transitions = numpy.zeros((n_tags, n_tags), dtype=bool)
    # In BIOES an entity is open after B or I; in BIO it may also close at any point.
    open_prefixes = ("B", "I")
    for j, (prefix, _) in enumerate(parsed):
        start[j] = prefix not in CONTINUE_PREFIXES
        end[j] = prefix not in open_prefixes if bioes else True
    for i, (prev_prefix, prev_label) in enumerate(parsed):
        for j, (prefix, label) in enumerate(parsed):
            if prefix in CONTINUE_PREFIXES:
                allowed = prev_prefix in open_prefixes and prev_label == label
            else:
                allowed = prev_prefix not in open_prefixes or not bioes
            transitions[i, j] = allowed
    return start, transitions, end


def is_valid_sequence(tag_ids: Sequence[int], tag_names: Sequence[str]) -> bool:
    """Whether a tag-id sequence obeys the scheme's allowed transitions."""
    if len(tag_ids) == 0:
        return True
    start, transitions, end = allowed_transitions(tag_names)
    if not start[tag_ids[0]] or not end[tag_ids[-1]]:
        return False
    return all(transitions[a, b] for a, b in zip(tag_ids[:-1], tag_ids[1:]))


# Token.ent_iob values: 1 inside an entity, 2 outside, 3 at its beginning (0 missing).
IOB_INSIDE, IOB_OUTSIDE, IOB_BEGIN = 1, 2, 3


def aligned_ner(example: Example) -> List[Optional[str]]:
    """example.get_aligned_ner(), without spaCy's alignment where both docs have the same tokens.

    spaCy aligns the two tokenizations and re-derives the tags from character offsets, which
    took an eighth of a training step of the default config (a character tokenizer makes the
    predicted and reference tokens identical). Where the docs' tokens have the same texts and
    trailing spaces, the tags are read off the reference doc: its entities in BILUO, "O"
    where it says outside or the token is whitespace, None (missing) elsewhere, as spaCy's.

    example (Example): A training example.
    RETURNS (List[Optional[str]]): BILUO tags of the predicted doc's tokens, None where missing.
    """
    x, y = example.predicted, example.reference
    # The same token texts and trailing spaces: the same text and tokens (Doc.text, a join over Token
    # objects, cost as much as the rest of this function).
    if len(x) != len(y) or not numpy.array_equal(x.to_array([ORTH, SPACY]), y.to_array([ORTH, SPACY])):
        return example.get_aligned_ner()
    if not y.has_annotation("ENT_IOB"):
        return [None] * len(x)
    outside = (y.to_array(ENT_IOB) == IOB_OUTSIDE) | (x.to_array(IS_SPACE) != 0)
    tags: List[Optional[str]] = [OUT if is_out else None for is_out in outside.tolist()]
    for ent in y.ents:
        label = ent.label_
        if ent.end - ent.start == 1:
            tags[ent.start] = f"U-{label}"
        else:
            tags[ent.start : ent.end] = [f"B-{label}"] + [f"I-{label}"] * (ent.end - ent.start - 2) + [f"L-{label}"]
    return tags


def gold_constraints(biluo: Sequence[Optional[str]], tag_set: TagSet) -> numpy.ndarray:
    """Per token, 1 for the gold tag, or for every tag where gold is missing.

    biluo (Sequence[Optional[str]]): The gold tags, as Example.get_aligned_ner() gives them.
    tag_set (TagSet): The tags the CRF predicts.
    RETURNS (numpy.ndarray): Allowed tags, shape (n_tokens, n_tags), float32.
    """
    tag_index = tag_set.index
    tags = biluo_to_tags(biluo, tag_set.scheme)
    # Unknown tags (missing annotation, labels we don't predict) stay -1.
    ids = numpy.asarray([tag_index.get(tag, -1) if tag else -1 for tag in tags], dtype="i")
    allowed = numpy.ones((len(ids), len(tag_index)), dtype="f")
    known = numpy.flatnonzero(ids >= 0)
    allowed[known] = 0
    allowed[known, ids[known]] = 1
    return allowed


def preset_constraints(doc: Doc, ranges: Sequence[Tuple[int, int]], tag_set: TagSet) -> List[Optional[numpy.ndarray]]:
    """Per token range [start, end) of the doc, the tags allowed by what the doc already
    says (shape (end - start, n_tags), float32), or None where anything goes.

    Pre-set entities are kept (spaCy's `ner` does the same), entities neither
    start on whitespace nor continue across a pre-set sentence start. No pre-set
    entity may cross a range's edge (doc_windows cuts outside them). Pre-set entities
    whose label is not among the tag set's labels are decoded as "O" and kept.
    """
    if not len(doc):
        return [None for _ in ranges]
    iob, is_space, sent_start = doc.to_array([ENT_IOB, IS_SPACE, SENT_START]).T
    preset = (iob == IOB_INSIDE) | (iob == IOB_BEGIN)
    sent_start[0] = 0  # the doc's start is not a pre-set sentence start
    if not (preset.any() or is_space.any() or (sent_start == 1).any()):
        return [None for _ in ranges]
    labels, scheme, tag_names, tag_index = set(tag_set.labels), tag_set.scheme, tag_set.names, tag_set.index
    prefixes = [split_tag(tag)[0] for tag in tag_names]
    out_only = numpy.asarray([tag == OUT for tag in tag_names], dtype="f")
    opening = numpy.asarray([prefix not in CONTINUE_PREFIXES for prefix in prefixes], dtype="f")
    ents = list(doc.ents)
    ent_starts = numpy.asarray([ent.start for ent in ents], dtype="i")
    constraints: List[Optional[numpy.ndarray]] = []
    for start, end in ranges:
        allowed = numpy.ones((end - start, len(tag_names)), dtype="f")
        allowed[is_space[start:end].astype(bool) & ~preset[start:end]] = out_only
        allowed[numpy.flatnonzero(sent_start[start + 1 : end] == 1) + 1] *= opening
        first, last = numpy.searchsorted(ent_starts, [start, end])
        for ent in ents[first:last]:
            ent_start, ent_end = ent.start - start, ent.end - start
            allowed[ent_start:ent_end] = out_only
            if ent.label_ not in labels:
                continue
            allowed[ent_start:ent_end] = 0
            span_tags = spans_to_tags([(0, len(ent), ent.label_)], len(ent), scheme)
            for k, tag in enumerate(span_tags):
                allowed[ent_start + k, tag_index[tag]] = 1
            # In BIO nothing closes an entity but the next token: it must not continue it.
            if ent_end < end - start:
                allowed[ent_end] *= opening
        constraints.append(allowed)
    return constraints
