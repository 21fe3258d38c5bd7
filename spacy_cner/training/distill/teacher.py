"""The teacher's side of distillation: its soft targets (loss.SoftTargets) on every text it is given, by
a pipeline step (`crf_ner_soft_targets`) that annotate's engine runs after the teacher's crf_ner
(resumable, batched, local or Ray), writing compact records (float16 marginals, float32 counts of the
allowed transitions) into DocBin shards; and the teacher folder (distill's OUTPUT/teacher) that holds the
prepared pipeline, the pass's inputs and its shards.
"""

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy
import srsly
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.util import minibatch
from thinc.api import Model
from thinc.types import Floats2d

from ...layers._torch import torch_module
from ...layers.crf_posteriors import chain_posteriors
from ...long_docs import doc_windows, segment_emissions
from ...tags import TagSet, allowed_transitions
from ...tokenizer import character_copy
from .loss import SOFT_TARGETS, Pieces, SoftTargets

# The row field of the train split's texts in the teacher's input: the doc's index in the train corpus.
GOLD_INDEX = "spacy_cner.gold_index"
# What a teacher folder holds (distill's OUTPUT/teacher).
TEACHER_META = "teacher.json"
TEACHER_PIPELINE = "pipeline"
TEACHER_INPUTS = "inputs"
TEACHER_SHARDS = "shards"


def teacher_soft_targets(
    model: Model, tag_set: TagSet, docs: List[Doc], long_doc_window: int, temperature: float = 1.0
) -> List[SoftTargets]:
    """A crf_ner model's soft targets for docs (float64): marginals, expected transition counts and
    entropy, every CRF score divided by temperature, under the docs' pre-set entities.

    A long doc is decoded in windows (long_docs.segment_emissions), each its own chain: its distribution is their
    product, so a window boundary's pair marginals are the product of the two sides' marginals (exactly),
    and the entropies add up. A doc longer than long_doc_window gets its windows' targets too (Pieces), which
    the student is trained on one by one.

    model (Model): The teacher's crf_ner model (with a "crf" ref).
    tag_set (TagSet): Its tags.
    docs (List[Doc]): The docs, tokenized as the model tags them.
    long_doc_window (int): The pipe's long_doc_window.
    temperature (float): Every CRF score is divided by it.
    RETURNS (List[SoftTargets]): Per doc, in the teacher's tag order.
    """
    tags = tuple(tag_set.names)
    n_tags = len(tags)
    decoded = segment_emissions(model, docs, tag_set, long_doc_window)
    # A long doc's pieces: its windows' owned ranges (as segment_emissions cut it), local to their segment.
    owned = {
        i: [(w.own_start, w.own_end) for w in doc_windows(doc, long_doc_window)]
        for i, doc in enumerate(docs)
        if long_doc_window and len(doc) > long_doc_window
    }
    local = [
        [(a - start, b - start) for a, b in owned[i] if start <= a < end] if i in owned else None
        for i, start, end in decoded.segments
    ]
    segments = chain_soft_targets(model.get_ref("crf"), decoded.emissions, decoded.allowed, temperature, pieces=local)
    out = [
        SoftTargets(tags, numpy.zeros((len(doc), n_tags)), numpy.zeros((n_tags, n_tags)), 0.0, temperature)
        for doc in docs
    ]
    previous: Dict[int, numpy.ndarray] = {}  # doc -> the last marginals row of its previous segment
    found_pieces: Dict[int, List[Tuple[int, Pieces]]] = {i: [] for i in owned}
    for (i, start_token, end_token), segment in zip(decoded.segments, segments):
        targets = out[i]
        targets.marginals[start_token:end_token] = segment.marginals
        targets.counts += segment.counts
        if i in previous:  # a window boundary: independent sides
            targets.counts += numpy.outer(previous[i], segment.marginals[0])
        previous[i] = segment.marginals[-1]
        targets.entropy += segment.entropy
        if segment.pieces is not None:
            found_pieces[i].append((start_token, segment.pieces))
    for i, parts in found_pieces.items():
        out[i].pieces = Pieces(
            numpy.concatenate([start + part.ends for start, part in parts]),
            numpy.concatenate([part.counts for _, part in parts]),
            numpy.concatenate([part.entropy for _, part in parts]),
        )
    return out


def chain_soft_targets(
    crf: Model,
    emissions: List[Floats2d],
    allowed: Optional[List[Floats2d]] = None,
    temperature: float = 1.0,
    pieces: Optional[Sequence[Optional[Sequence[Tuple[int, int]]]]] = None,
) -> List[SoftTargets]:
    """The soft targets of a CRF layer's chain over each sequence's emissions (float64, none empty), from
    layers.crf_posteriors.chain_posteriors: every score divided by temperature, tags outside allowed (per
    token, when given) left out.

    crf (Model): A CRF layer (spacy-cner.CRF.v1).
    emissions (List[Floats2d]): Emission scores (length, n_tags) per sequence.
    allowed (Optional[List[Floats2d]]): Per-token tag masks, e.g. of pre-set entities.
    temperature (float): Every CRF score is divided by it.
    pieces (Optional[Sequence[Optional[Sequence[Tuple[int, int]]]]]): Per sequence, None or [start, end)
        ranges that tile it: the chain's marginal over each (Pieces: its transition counts and entropy).
    RETURNS (List[SoftTargets]): Per sequence: marginals, expected transition counts, entropy (and pieces).
    """
    if not temperature > 0:
        raise ValueError(f"The distillation temperature must be positive, got {temperature}.")
    tags = tuple(torch_module(crf).tag_names)
    out = []
    for i, found in enumerate(chain_posteriors(crf, emissions, allowed, temperature, pieces)):
        targets = SoftTargets(tags, found.marginals, found.counts, found.entropy, temperature)
        if found.piece_counts is not None:
            ends = numpy.asarray([end for _, end in pieces[i]], dtype="int64")
            targets.pieces = Pieces(ends, found.piece_counts, found.piece_entropy)
        out.append(targets)
    return out


def soft_targets_record(targets: SoftTargets) -> Dict[str, Any]:
    """A doc's targets as stored in the teacher's shards (msgpack): marginals in float16, the counts of
    the allowed transitions only, in float32 (a doc's counts reach its length: float16 would round them)."""
    _, allowed, _ = allowed_transitions(targets.tags)
    record = {
        "marginals": targets.marginals.astype("float16"),
        "counts": targets.counts[allowed].astype("float32"),
        "entropy": float(targets.entropy),
        "temperature": float(targets.temperature),
    }
    if targets.pieces is not None:  # a long doc's windows: what the student is trained on
        record["piece_ends"] = targets.pieces.ends.astype("int64")
        record["piece_counts"] = targets.pieces.counts[:, allowed].astype("float32")
        record["piece_entropy"] = targets.pieces.entropy.astype("float64")
    return record


def read_soft_targets(record: Dict[str, Any], tags: Sequence[str], gold_weight: float = 0.0) -> SoftTargets:
    """SoftTargets from a stored record (soft_targets_record) of a teacher with these tags."""
    tags = tuple(tags)
    _, allowed, _ = allowed_transitions(tags)
    counts = numpy.zeros(allowed.shape, dtype="float32")
    counts[allowed] = record["counts"]
    marginals = numpy.asarray(record["marginals"]).reshape(-1, len(tags))
    pieces = None
    if record.get("piece_ends") is not None:
        ends = numpy.asarray(record["piece_ends"], dtype="int64")
        piece_counts = numpy.zeros((len(ends),) + allowed.shape, dtype="float32")
        piece_counts[:, allowed] = numpy.asarray(record["piece_counts"]).reshape(len(ends), -1)
        pieces = Pieces(ends, piece_counts, numpy.asarray(record["piece_entropy"], dtype="float64"))
    return SoftTargets(
        tags, marginals, counts, float(record["entropy"]), float(record["temperature"]), gold_weight, pieces
    )


@Language.factory(
    "crf_ner_soft_targets",
    assigns=["doc.user_data"],
    default_config={"teacher": "crf_ner", "temperature": 1.0},
)
def make_soft_targets(nlp: Language, name: str, teacher: str, temperature: float) -> "SoftTargetsWriter":
    """A step after a trained crf_ner (the teacher) that stores its soft targets in each doc's user_data
    (for a DocBin with store_user_data). The teacher itself may be disabled: its model is read directly.

    teacher (str): The name of the teacher's crf_ner component.
    temperature (float): Every CRF score is divided by it.
    """
    return SoftTargetsWriter(nlp, name, teacher, temperature)


class SoftTargetsWriter:
    """Sets doc.user_data[SOFT_TARGETS] to soft_targets_record(the teacher's targets); on the docs'
    characters (and marked so) where the teacher tags a character copy of longer tokens."""

    def __init__(self, nlp: Language, name: str, teacher: str, temperature: float) -> None:
        if not temperature > 0:
            raise ValueError(f"The distillation temperature must be positive, got {temperature}.")
        self.nlp = nlp
        self.name = name
        self.teacher = teacher
        self.temperature = temperature

    def __call__(self, doc: Doc) -> Doc:
        return next(iter(self.pipe([doc])))

    def pipe(self, docs: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        pipe = self.nlp.get_pipe(self.teacher)
        for batch in minibatch(docs, batch_size):
            char_docs = [character_copy(doc) if pipe.cfg.get("token_unit") == "char" else None for doc in batch]
            tagged = [char_doc if char_doc is not None else doc for doc, char_doc in zip(batch, char_docs)]
            found = teacher_soft_targets(
                pipe.model, pipe.tag_set, [d for d in tagged if len(d)], pipe.long_doc_window, self.temperature
            )
            found_iter = iter(found)
            for doc, tagged_doc, char_doc in zip(batch, tagged, char_docs):
                if not len(tagged_doc):
                    continue
                record = soft_targets_record(next(found_iter))
                record["unit"] = "char" if char_doc is not None else "token"
                doc.user_data[SOFT_TARGETS] = record
            yield from batch


def prepare_teacher(teacher: str, folder: Path, temperature: float) -> List[str]:
    """The teacher pipeline with a crf_ner_soft_targets step after its crf_ner (which is disabled: the step
    reads its model), saved once in folder/pipeline, and teacher.json (the teacher's fingerprint, the
    temperature, the tags). A folder made from another teacher or temperature is refused: its shards
    would mix two teachers.

    RETURNS (List[str]): The teacher's tag names.
    """
    import spacy

    from ...annotate.resume import model_fingerprint

    meta_path = folder / TEACHER_META
    fingerprint = model_fingerprint(teacher)
    if meta_path.is_file() and (folder / TEACHER_PIPELINE).is_dir():
        meta = srsly.read_json(meta_path)
        if meta.get("fingerprint") != fingerprint or meta.get("temperature") != temperature:
            raise ValueError(
                f"{folder} holds soft targets of another teacher or temperature ({meta.get('teacher')}, T = "
                f"{meta.get('temperature')}): rerun with those, write to a new --output, or delete {folder}."
            )
        return list(meta["tags"])
    try:
        nlp = spacy.load(teacher)
    except OSError as err:
        raise ValueError(f"Cannot load the teacher {teacher!r}: {err}") from None
    names = [name for name, pipe in nlp.pipeline if hasattr(pipe, "tag_set") and pipe.model.has_ref("crf")]
    if not names:
        raise ValueError(f"The teacher {teacher!r} has no crf_ner component (its pipeline: {nlp.pipe_names}).")
    name = names[-1]
    tags = list(nlp.get_pipe(name).tag_names)
    nlp.add_pipe("crf_ner_soft_targets", after=name, config={"teacher": name, "temperature": temperature})
    nlp.disable_pipe(name)
    if folder.exists():  # a pass killed before teacher.json: nothing of it can be trusted
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    nlp.to_disk(folder / TEACHER_PIPELINE)
    srsly.write_json(
        meta_path,
        {
            "teacher": str(teacher),
            "fingerprint": fingerprint,
            "temperature": temperature,
            "component": name,
            "tags": tags,
        },
    )
    return tags


def write_teacher_inputs(
    folder: Path,
    train: Path,
    texts: Sequence[Any],
    augment: int = 0,
    dev: Optional[Path] = None,
    test: Optional[Path] = None,
) -> None:
    """The teacher pass's input folder: train.jsonl (the train split's texts, each with its index, so that
    its gold doc is found again), augmented_<augment>x.jsonl where augment > 0 (the train split's docs with
    their entities replaced, mention_replaced_texts, none a text of dev or test; no gold) and a link to each
    unlabeled text file (text_<hash of its path>_<its name>), each of texts a file, a folder or a glob as
    annotate reads them ("" is left out); links and augmented files of earlier calls' other settings are
    removed (their shards are kept)."""
    import spacy

    from ...annotate.inputs import find_sources
    from ..augment import mention_replaced_texts

    folder.mkdir(parents=True, exist_ok=True)
    vocab = spacy.blank("xx").vocab
    docs = list(DocBin().from_disk(train).get_docs(vocab))
    lines = [json.dumps({"text": doc.text, GOLD_INDEX: i}, ensure_ascii=False) for i, doc in enumerate(docs)]
    _write_if_changed(folder / "train.jsonl", lines)
    augmented = folder / f"augmented_{augment}x.jsonl"
    for path in folder.glob("augmented_*x.jsonl"):
        if path != augmented or not augment:
            path.unlink()
    if augment:
        held_out = [
            doc.text for split in (dev, test) if split is not None for doc in DocBin().from_disk(split).get_docs(vocab)
        ]
        new_texts = mention_replaced_texts(docs, augment, exclude=held_out)
        _write_if_changed(augmented, [json.dumps({"text": text}, ensure_ascii=False) for text in new_texts])
    links = {}
    for text in texts:
        for source in find_sources(str(text)) if str(text) else ():
            target = source.path.resolve()
            # Named by the file's path, not its place among texts: its shards are found again in any order.
            tag = hashlib.sha256(str(target).encode("utf8")).hexdigest()[:8]
            links[folder / f"text_{tag}_{source.name.replace('/', '_')}{source.path.suffix}"] = target
    for link in folder.iterdir():  # texts of an earlier call not given now: not read (their shards are kept)
        if link.is_symlink() and link not in links:
            link.unlink()
    for link, target in links.items():
        if link.is_symlink() and link.resolve() == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)


def _write_if_changed(path: Path, lines: List[str]) -> None:
    """Write the lines as the file unless it holds them already (annotate refuses an input whose content
    changed under its written shards; an unchanged file keeps them)."""
    content = "".join(line + "\n" for line in lines)
    if not path.is_file() or path.read_text(encoding="utf8") != content:
        path.write_text(content, encoding="utf8", newline="\n")
