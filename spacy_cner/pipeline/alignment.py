"""Characters <-> tokens for the `crf_ner` pipe: a model trained on characters tags a doc of longer
tokens (a jieba or pkuseg pipeline) on a character copy of it (tokenizer.character_copy), and
its entities and scored spans are mapped back onto the doc's tokens with Doc.char_span in an alignment mode."""

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc, Span


def align_spans(
    char_doc: Doc, doc: Doc, spans: Sequence[Tuple[int, int, str]], mode: str
) -> Tuple[List[Tuple[int, int, str]], int]:
    """Entities (token spans of char_doc) as token spans of doc, by Doc.char_span in this
    alignment mode; those that do not map, or overlap an earlier one once mapped, are left
    out. RETURNS: the spans and how many were left out."""
    aligned: List[Tuple[int, int, str]] = []
    taken = numpy.zeros(len(doc) + 1, dtype=bool)
    for start, end, label in spans:
        span = token_span(char_doc, doc, start, end, mode)
        if span is None or taken[span.start : span.end].any():
            continue
        taken[span.start : span.end] = True
        aligned.append((span.start, span.end, label))
    return aligned, len(spans) - len(aligned)


def token_span(char_doc: Doc, doc: Doc, start: int, end: int, mode: str) -> Optional[Span]:
    """Tokens start..end of char_doc as a non-empty span of doc's tokens (Doc.char_span in
    this alignment mode), or None."""
    span = doc.char_span(char_doc[start].idx, char_doc[end - 1].idx + len(char_doc[end - 1]), alignment_mode=mode)
    return span if span is not None and len(span) else None


def align_scores(
    char_doc: Doc, doc: Doc, scores: Dict[Tuple[int, int, str], float], mode: str
) -> Dict[Tuple[int, int, str], float]:
    """Scored spans of char_doc as spans of doc (see align_spans); spans that map onto the same
    tokens keep the highest probability."""
    out: Dict[Tuple[int, int, str], float] = {}
    for (start, end, label), probability in scores.items():
        span = token_span(char_doc, doc, start, end, mode)
        if span is not None:
            key = (span.start, span.end, label)
            out[key] = max(probability, out.get(key, 0.0))
    return out


def token_unit(docs: Iterable[Doc]) -> str:
    """ "char" when every token of the training docs (spaces aside) is one character: the model
    learns on characters, and a doc of longer tokens is tagged on its character copy; else "token"."""
    return "char" if all(len(t) == 1 for doc in docs for t in doc if not t.is_space) else "token"
