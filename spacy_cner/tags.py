"""Tag schemes, span <-> tag conversion and the transitions a CRF may take."""
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy

SCHEMES = ("BIOES", "BIO")
OUT = "O"
# Prefixes that continue an entity opened by an earlier token.
CONTINUE_PREFIXES = ("I", "E")
# spaCy's BILUO prefixes in each scheme (Example.get_aligned_ner speaks BILUO).
_FROM_BILUO = {
    "BIOES": {"B": "B", "I": "I", "L": "E", "U": "S"},
    "BIO": {"B": "B", "I": "I", "L": "I", "U": "B"},
}
_PREFIXES = {"BIOES": ("B", "I", "E", "S"), "BIO": ("B", "I")}

Span = Tuple[int, int, str]


def validate_scheme(scheme: str) -> str:
    """Return the scheme in upper case or raise naming the accepted ones."""
    upper = scheme.upper()
    if upper not in SCHEMES:
        raise ValueError(
            f"Unknown tag scheme {scheme!r}: expected one of {', '.join(SCHEMES)}. "
            "Set it with the crf_ner component's `scheme` setting."
        )
    return upper


def get_tag_names(labels: Iterable[str], scheme: str) -> List[str]:
    """The tag names of a scheme, "O" first, then each label's prefixes.

    labels (Iterable[str]): The entity labels, in output order.
    scheme (str): "BIOES" or "BIO".
    RETURNS (List[str]): Tag names such as ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"].
    """
    prefixes = _PREFIXES[validate_scheme(scheme)]
    return [OUT] + [f"{prefix}-{label}" for label in labels for prefix in prefixes]


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


def spans_to_tags(spans: Iterable[Span], length: int, scheme: str) -> List[str]:
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


def tags_to_spans(tags: Sequence[str]) -> List[Span]:
    """Decode BIOES or BIO tags into (start, end, label) token spans.

    A continuation tag with no matching opener starts a new span, so an
    ill-formed sequence loses no entity.

    tags (Sequence[str]): One tag per token.
    RETURNS (List[Tuple[int, int, str]]): Spans, end exclusive, in order.
    """
    spans: List[Span] = []
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


def allowed_transitions(
    tag_names: Sequence[str],
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Which tags may start, follow one another and end a sequence.

    The scheme is read from the prefixes: E- or S- tags mean BIOES, else BIO.

    tag_names (Sequence[str]): The tag names in output order.
    RETURNS (Tuple[ndarray, ndarray, ndarray]): Boolean masks: start (n,),
        transitions (n, n) indexed [from, to], and end (n,).
    """
    parsed = [split_tag(tag) for tag in tag_names]
    bioes = any(prefix in ("E", "S") for prefix, _ in parsed)
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
