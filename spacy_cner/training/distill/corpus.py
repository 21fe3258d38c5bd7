"""The distillation corpus (spacy-cner.distill_corpus.v1): a teacher folder's shards as training Examples,
each doc with its soft targets, the gold docs of the train split joined where present; a doc longer than the
student's window given as its windows, as the student predicts in windows."""

from pathlib import Path
from typing import Callable, Iterator, List, Optional

import numpy
import srsly
from spacy.language import Language
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.util import registry

from ...long_docs import WINDOW_ATTRS, Window, doc_windows, window_doc
from .loss import SOFT_TARGETS, Pieces, SoftTargets, pieces_of
from .teacher import GOLD_INDEX, TEACHER_INPUTS, TEACHER_META, TEACHER_SHARDS, read_soft_targets


@registry.readers("spacy-cner.distill_corpus.v1")
def create_distill_corpus(
    path: Path, gold: Optional[Path] = None, gold_weight: float = 0.5
) -> Callable[[Language], Iterator[Example]]:
    """Training examples from a teacher folder (distill's OUTPUT/teacher): each annotated doc with its soft
    targets (doc.user_data[SOFT_TARGETS]); a doc of the train split gets its gold doc as reference, and
    the gold log-likelihood beside its targets at gold_weight. Empty and bad rows are left out.

    path (Path): The teacher folder: teacher.json and shards/*.spacy.
    gold (Optional[Path]): The train split (.spacy) whose texts the teacher annotated; None: no gold.
    gold_weight (float): The gold negative log-likelihood's weight beside the KL (0: soft targets only).
    RETURNS (Callable[[Language], Iterator[Example]]): The corpus, as spaCy's readers give one.
    """
    if gold_weight < 0:
        raise ValueError(f"gold_weight must be at least 0, not {gold_weight}.")
    folder = Path(path)
    meta_path = folder / TEACHER_META
    if not meta_path.is_file():
        raise ValueError(f"{folder} is not a teacher folder (no {TEACHER_META}): run `python -m spacy_cner distill`.")

    def read(nlp: Language) -> Iterator[Example]:
        meta = srsly.read_json(meta_path)
        tags = tuple(meta["tags"])
        windows = [pipe.long_doc_window for _, pipe in nlp.pipeline if hasattr(pipe, "long_doc_window")]
        window = windows[0] if windows else 0
        gold_docs = list(DocBin().from_disk(gold).get_docs(nlp.vocab)) if gold is not None else []
        # The shards of the inputs given now: <input name>.<index>.spacy (an earlier call's other texts are
        # kept, unread).
        inputs = {path.with_suffix("").name for path in (folder / TEACHER_INPUTS).iterdir()}
        shards = [p for p in sorted((folder / TEACHER_SHARDS).glob("*.spacy")) if p.name.rsplit(".", 2)[0] in inputs]
        for shard in shards:
            for doc in DocBin().from_disk(shard).get_docs(nlp.vocab):
                record = doc.user_data.get(SOFT_TARGETS)
                if record is None or "error" in doc.user_data:
                    continue
                predicted = nlp.make_doc(doc.text)
                index = (doc.user_data.get("fields") or {}).get(GOLD_INDEX)
                if index is not None and index < len(gold_docs):
                    if gold_docs[index].text != doc.text:
                        raise ValueError(
                            f"{shard}: its text {doc.text[:40]!r} is doc {index} of the train split the teacher "
                            f"read, but doc {index} of {gold} is {gold_docs[index].text[:40]!r}: pass the same "
                            "train split as when the teacher's targets were computed (or a new output folder)."
                        )
                    example = Example(predicted, gold_docs[index])
                    weight = gold_weight
                else:
                    example = Example.from_dict(predicted, {})
                    weight = 0.0
                targets = read_soft_targets(record, tags, weight)
                if len(targets.marginals) != len(predicted):
                    unit = "characters" if record.get("unit") == "char" else "tokens"
                    raise ValueError(
                        f"{shard}: the teacher tagged {doc.text[:40]!r} as {len(targets.marginals)} {unit}, the "
                        f"student's tokenizer gives {len(predicted)}: the student must split texts as the teacher "
                        "tagged them (one token per character for a character model)."
                    )
                if targets.pieces is None and window and len(predicted) > window:
                    # A teacher folder from before the pieces were stored: the student's windows, the
                    # transition counts of each the product of its marginals.
                    ends = [w.own_end for w in doc_windows(predicted, window)]
                    targets.pieces = Pieces(numpy.asarray(ends), None, numpy.zeros(len(ends)))
                yield from _window_examples(example, targets)

    return read


def _window_examples(example: Example, targets: SoftTargets) -> Iterator[Example]:
    """The example itself with its targets, or, for a long doc (targets.pieces), one example per window:
    the student is trained on windows as it predicts in windows, its memory bounded by the window (a whole
    long line at once can exhaust it). A gold entity cut by a window's edge is left unannotated (missing,
    marginalised over) on both sides of the cut."""
    predicted = example.predicted
    if targets.pieces is None:
        predicted.user_data[SOFT_TARGETS] = targets
        yield example
        return
    gold = example.reference.has_annotation("ENT_IOB")
    tags = [tag or "-" for tag in example.get_aligned_ner()] if gold else None
    array = predicted.to_array(WINDOW_ATTRS)
    for start, end, piece_targets in pieces_of(targets):
        piece = window_doc(predicted, Window(start, end, start, end), array)
        piece_example = Example.from_dict(piece, {"entities": _uncut(tags[start:end])} if tags else {})
        piece.user_data[SOFT_TARGETS] = piece_targets
        yield piece_example


def _uncut(tags: List[str]) -> List[str]:
    """BILUO tags of a window, an entity cut at either edge made missing ("-")."""
    tags = list(tags)
    k = 0
    while k < len(tags) and tags[k][:2] in ("I-", "L-"):  # began before the window
        last = tags[k][:2] == "L-"
        tags[k] = "-"
        k += 1
        if last:
            break
    k = len(tags) - 1
    while k >= 0 and tags[k][:2] in ("B-", "I-"):  # goes on after the window
        first = tags[k][:2] == "B-"
        tags[k] = "-"
        k -= 1
        if first:
            break
    return tags
