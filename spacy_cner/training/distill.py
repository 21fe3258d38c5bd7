"""Distillation (issue 58): a small `crf_ner` (the student) learns a trained `crf_ner`'s (the teacher's)
distribution over tag sequences, on the train split and on as much unlabeled text as there is.

The teacher's soft targets come from the forward-backward pass that gives ent._.score, at a temperature
T: each token's tag marginals q_t, the expected transition counts C[i, j] = sum_t q(y_t-1 = i, y_t = j),
and the entropy H(q) of its distribution over sequences. The student's loss is the KL divergence of its
CRF (at the same T) from the teacher's, over whole tag sequences, times T^2 (Hinton et al. 2015, sec. 2):

    KL(q || p_T) = -H(q) - E_q[log p_T(y | x)],  log p_T(y | x) = s(y) / T - log Z_T,
    s(y) = start[y_0] + sum_t e[t, y_t] + sum_t A[y_t-1, y_t] + end[y_n],

and E_q[s(y)] = q_0 . start + sum_t q_t . e_t + <C, A> + q_n . end is linear in the scores: q_t and C
are all the loss needs (one (n_tags, n_tags) array per doc, not one per token). Its gradient is
T (p_t - q_t) for the emissions and T (E_p[counts] - C) for the transitions, p the student's marginals
(Sutton and McCallum 2012, eq. 1.33 for d log Z). With the teacher's own pair marginals in C this is
exactly the sequence-level KL (structure-level distillation, Wang et al. 2020): the teacher is a
linear chain, so its pair marginals determine its distribution. Where no counts are given, C is
sum_t q_t (x) q_t+1 over the allowed transitions: wrong exactly where the teacher is unsure of an entity's
boundary (q(B-X) = q(O) = 1/2 then q(E-X) = q(O) = 1/2: the product puts 1/4 on each of the forbidden
B-X -> O and O -> E-X instead of 1/2 on B-X -> E-X and O -> O), which is why the teacher pass keeps C.

Where each part is:
- teacher_student_loss and _TeacherStudentKL: the loss and its gradient (crf_ner.get_loss calls it for
  examples that carry soft targets in doc.user_data[SOFT_TARGETS]);
- teacher_soft_targets and the `crf_ner_soft_targets` component: the teacher's side, a pipeline step
  that annotate's engine runs (resumable, batched, local or Ray), writing compact records (float16
  marginals, float32 counts of the allowed transitions) into DocBin shards;
- create_distill_corpus (spacy-cner.distill_corpus.v1): the shards as training Examples, the gold
  docs of the train split joined where present;
- distill: the teacher pass, then the student trained by spaCy's own loop (model-best on dev F1).
"""

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy
import srsly
import torch
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.util import minibatch, registry
from spacy.vocab import Vocab
from thinc.api import Model, torch2xp
from thinc.types import Floats1d, Floats2d
from torch.nn.utils import parametrize
from wasabi import msg

from ..backends.batching import batches_by_budget
from ..layers._torch import pad_batch, torch_module
from ..layers.crf import FORBIDDEN
from ..layers.crf_posteriors import LATTICE_BATCH_TOKENS
from ..backends.forward_backward import forward_backward, pair_expectations
from ..long_docs import WINDOW_ATTRS, Window, doc_windows, segment_emissions, window_doc
from ..tags import TagSet, allowed_transitions
from ..tokenizer import character_copy

# The doc.user_data key of a doc's soft targets: a SoftTargets in training, a record (soft_targets_record)
# in the teacher's shards.
SOFT_TARGETS = "spacy_cner.soft_targets"
# The row field of the train split's texts in the teacher's input: the doc's index in the train corpus.
GOLD_INDEX = "spacy_cner.gold_index"
# What a teacher folder holds (distill's OUTPUT/teacher).
TEACHER_META = "teacher.json"
TEACHER_PIPELINE = "pipeline"
TEACHER_INPUTS = "inputs"
TEACHER_SHARDS = "shards"


@dataclasses.dataclass
class SoftTargets:
    """A teacher's soft targets for one doc, in the teacher's tag order (tags).

    marginals: (n_tokens, n_tags), q(y_t = j); float16 as stored, read as float32.
    counts: (n_tags, n_tags), sum_t q(y_t-1 = i, y_t = j); None: the product of neighbouring marginals.
    entropy: H(q) in nats (0 where unknown: the loss is then the KL up to a constant).
    temperature: the T the targets were computed at, and the student's loss is computed at.
    gold_weight: the weight of the gold log-likelihood beside them (0: no gold, e.g. unlabeled text).
    pieces: a doc longer than the teacher's window: the targets of each window (Pieces), which the student
        is trained on one by one (pieces_of), as it predicts in windows; None for a shorter doc.
    """

    tags: Tuple[str, ...]
    marginals: numpy.ndarray
    counts: Optional[numpy.ndarray] = None
    entropy: float = 0.0
    temperature: float = 1.0
    gold_weight: float = 0.0
    pieces: Optional["Pieces"] = None

    def in_order(self, tag_names: Sequence[str]) -> "SoftTargets":
        """The targets with their columns in the order of tag_names (the student's)."""
        tag_names = tuple(tag_names)
        if tag_names == self.tags:
            return self
        if sorted(tag_names) != sorted(self.tags):
            raise ValueError(
                f"The student's tags {list(tag_names)} are not the teacher's {list(self.tags)}: give the student "
                "the teacher's labels and scheme (distill sets its labels from the teacher's)."
            )
        order = [self.tags.index(tag) for tag in tag_names]
        counts = None if self.counts is None else self.counts[numpy.ix_(order, order)]
        pieces = self.pieces
        if pieces is not None and pieces.counts is not None:
            pieces = dataclasses.replace(pieces, counts=pieces.counts[:, order][:, :, order])
        return dataclasses.replace(
            self, tags=tag_names, marginals=self.marginals[:, order], counts=counts, pieces=pieces
        )


@dataclasses.dataclass
class Pieces:
    """A long doc's windows, the units the student is trained on: the owned token ranges of the teacher's
    windows (long_docs.doc_windows), which tile the doc, each with the teacher's distribution over its
    tags (its marginal chain: the expected transition counts within the window and its entropy). Where
    the teacher's windows end at a sentence end, each is its own chain and the pieces are exact; over one
    long sentence the teacher's chain runs across the windows, and each piece is that chain's marginal
    over the window (the pairs across a cut are left out).

    ends: (n_pieces,) the token each piece ends at; the first starts at 0, each next where one ends.
    counts: (n_pieces, n_tags, n_tags) the expected transition counts inside each; None: product_counts.
    entropy: (n_pieces,) the entropy of each piece's distribution (0 where unknown).
    """

    ends: numpy.ndarray
    counts: Optional[numpy.ndarray]
    entropy: numpy.ndarray

    def ranges(self) -> List[Tuple[int, int]]:
        """Each piece's [start, end) token range."""
        ends = [int(end) for end in self.ends]
        return list(zip([0] + ends[:-1], ends))


def pieces_of(targets: SoftTargets) -> List[Tuple[int, int, SoftTargets]]:
    """The doc's pieces (start, end, their SoftTargets), to train the student on one window at a time:
    memory bounded by the window, not the doc; the whole doc as one piece when it has none."""
    if targets.pieces is None:
        return [(0, len(targets.marginals), targets)]
    out = []
    for k, (start, end) in enumerate(targets.pieces.ranges()):
        counts = None if targets.pieces.counts is None else targets.pieces.counts[k]
        piece = dataclasses.replace(
            targets,
            marginals=targets.marginals[start:end],
            counts=counts,
            entropy=float(targets.pieces.entropy[k]),
            pieces=None,
        )
        out.append((start, end, piece))
    return out


def soft_targets(examples: Sequence[Example], tag_names: Sequence[str]) -> Optional[List[Optional[SoftTargets]]]:
    """The soft targets each example's predicted doc carries (doc.user_data[SOFT_TARGETS]), in the order
    of tag_names, None for an example without; None when no example has any (plain gold training).

    examples (Sequence[Example]): A batch, e.g. from spacy-cner.distill_corpus.v1.
    tag_names (Sequence[str]): The student's tags.
    RETURNS (Optional[List[Optional[SoftTargets]]]): Per example, its targets or None.
    """
    found = [eg.predicted.user_data.get(SOFT_TARGETS) for eg in examples]
    if not any(isinstance(targets, SoftTargets) for targets in found):
        return None
    out = []
    for eg, targets in zip(examples, found):
        if not isinstance(targets, SoftTargets):
            out.append(None)
            continue
        if len(targets.marginals) != len(eg.predicted):
            raise ValueError(
                f"Soft targets for {len(targets.marginals)} tokens on a doc of {len(eg.predicted)} "
                f"({eg.predicted.text[:40]!r}): the student must split texts as the teacher tagged them."
            )
        out.append(targets.in_order(tag_names))
    return out


def teacher_student_loss(
    crf: Model, scores: List[Floats2d], targets: List[SoftTargets], *, scale: float = 1.0
) -> Tuple[Floats1d, List[Floats2d]]:
    """T^2 KL(teacher || student) over tag sequences per doc and d loss / d scores (see the module's
    docstring). The CRF's start, transition and end gradients are accumulated too (as its get_loss
    does), for the next finish_update.

    crf (Model): The student's CRF layer (spacy-cner.CRF.v1).
    scores (List[Floats2d]): The student's emission scores per doc, none empty.
    targets (List[SoftTargets]): Per doc, the teacher's targets in the student's tag order; one temperature.
    scale (float): The losses and gradients times this.
    RETURNS (Tuple[Floats1d, List[Floats2d]]): The loss per doc and d_scores.
    """
    if any(len(doc_scores) == 0 for doc_scores in scores):
        raise ValueError("teacher_student_loss got an empty doc: leave empty docs out of the batch.")
    temperatures = {t.temperature for t in targets}
    if len(temperatures) != 1:
        raise ValueError(f"Soft targets of one batch must share a temperature, got {sorted(temperatures)}.")
    temperature = temperatures.pop()
    module = torch_module(crf)
    device = module.device
    _, allowed, _ = allowed_transitions(module.tag_names)
    emissions, mask = pad_batch(crf, scores, requires_grad=True, device=device)
    marginals, _ = pad_batch(crf, [t.marginals for t in targets], requires_grad=False, device=device)
    marginals = marginals.double() * mask.unsqueeze(-1)
    # float16 rows sum to 1 within its rounding: renormalised, so the loss is 0 where the student is the teacher.
    marginals = marginals / marginals.sum(dim=2, keepdim=True).clamp(min=1e-12)
    counts = torch.stack(
        [
            torch.as_tensor(
                t.counts if t.counts is not None else product_counts(t.marginals, allowed), dtype=torch.float64
            )
            for t in targets
        ]
    ).to(device)
    entropy = torch.as_tensor([t.entropy for t in targets], dtype=torch.float64, device=device)
    with parametrize.cached():
        loss = _TeacherStudentKL.apply(
            emissions,
            mask,
            marginals,
            counts,
            entropy,
            float(temperature),
            module.start_transitions,
            module.transitions,
            module.end_transitions,
        )
    (loss.sum() * scale).backward()
    d_scores = crf.ops.unpad(torch2xp(emissions.grad), [len(doc_scores) for doc_scores in scores])
    return crf.ops.asarray1f(torch2xp(loss.detach())) * scale, d_scores


def product_counts(marginals: numpy.ndarray, allowed: numpy.ndarray) -> numpy.ndarray:
    """sum_t q_t (x) q_t+1 on the allowed transitions: expected counts when the teacher's pair marginals
    are not known (see the module's docstring for what this gets wrong)."""
    q = numpy.asarray(marginals, dtype="float64")
    return (q[:-1].T @ q[1:]) * allowed


class _TeacherStudentKL(torch.autograd.Function):
    """T^2 KL(q || p_T) per doc from the teacher's marginals, expected transition counts and entropy,
    with its gradient read off the student's forward-backward marginals (float64), as
    layers.crf._AllowedPathsLogLikelihood reads the log-likelihood's.

    Forbidden transitions and start or end tags (FORBIDDEN, fixed) are left out of E_q[s(y)]: the
    teacher gives them no mass, and product_counts none."""

    @staticmethod
    def forward(ctx, emissions, mask, marginals, counts, entropy, temperature, start, transitions, end):
        n_docs = emissions.shape[0]
        emit = emissions.detach().double().masked_fill(~mask.unsqueeze(-1), 0.0) / temperature
        scores = tuple(t.detach().double() / temperature for t in (transitions, start, end))
        alpha, beta, log_z = forward_backward(emit, mask, *scores)
        allowed = tuple(t > FORBIDDEN / 2 for t in (transitions, start, end))
        transitions_t, start_t, end_t = (torch.where(ok, s, 0.0) for ok, s in zip(allowed, scores))
        last = mask.sum(dim=1) - 1
        rows = torch.arange(n_docs, device=emit.device)
        # E_q[s(y)] / T, shape: (batch,)
        expected = (
            (marginals * emit).sum(dim=(1, 2))
            + (counts * transitions_t).sum(dim=(1, 2))
            + marginals[:, 0] @ start_t
            + marginals[rows, last] @ end_t
        )
        ctx.save_for_backward(emit, mask, marginals, counts, alpha, beta, log_z, scores[0])
        ctx.temperature = temperature
        ctx.dtypes = (emissions.dtype, start.dtype, transitions.dtype, end.dtype)
        return ((log_z - expected - entropy) * temperature**2).to(emissions.dtype)

    @staticmethod
    def backward(ctx, d_loss):
        emit, mask, marginals, counts, alpha, beta, log_z, transitions = ctx.saved_tensors
        temperature = ctx.temperature
        emissions_dtype, start_dtype, transitions_dtype, end_dtype = ctx.dtypes
        # d loss / d (score / T) is T^2 (p - q); d (score / T) / d score is 1 / T.
        weight = d_loss.double() * temperature
        # shape: (batch, length, n_tags), the student's P(y_t = j), zero at padding
        student = torch.exp(alpha + beta - log_z[:, None, None]) * mask.unsqueeze(-1)
        difference = (student - marginals) * weight[:, None, None]
        last = mask.sum(dim=1) - 1
        rows = torch.arange(len(last), device=last.device)
        pairs = mask[:, 1:]
        student_counts = pair_expectations(
            alpha[:, :-1][pairs],
            (emit[:, 1:] + beta[:, 1:] - log_z[:, None, None])[pairs],
            transitions,
            weight.unsqueeze(1).expand(-1, pairs.shape[1])[pairs],
        )
        d_transitions = student_counts - (counts * weight[:, None, None]).sum(dim=0)
        return (
            difference.to(emissions_dtype),
            None,
            None,
            None,
            None,
            None,
            difference[:, 0].sum(dim=0).to(start_dtype),
            d_transitions.to(transitions_dtype),
            difference[rows, last].sum(dim=0).to(end_dtype),
        )


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
    """The soft targets of a CRF layer's chain over each sequence's emissions (float64, none empty):
    one forward-backward pass per group of similar lengths (as the entity probabilities'), every score
    divided by temperature, tags outside allowed (per token, when given) left out.

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
    module = torch_module(crf)
    tags = tuple(module.tag_names)
    device = module.device
    start_ok, transitions_ok, end_ok = (torch.from_numpy(a).to(device) for a in allowed_transitions(tags))
    lengths = [len(scores) for scores in emissions]
    out: List[Optional[SoftTargets]] = [None] * len(lengths)
    with torch.no_grad(), parametrize.cached():
        transitions, start, end = (
            t.double() / temperature for t in (module.transitions, module.start_transitions, module.end_transitions)
        )
        kept = [torch.where(ok, s, 0.0) for ok, s in ((transitions_ok, transitions), (start_ok, start), (end_ok, end))]
        for group in batches_by_budget(lengths, LATTICE_BATCH_TOKENS, by_length=True, padded=True, skip_empty=True):
            emit, mask = pad_batch(crf, [emissions[i] for i in group], requires_grad=False, device=device)
            emit = emit.double() / temperature
            if allowed is not None:
                allowed_mask, _ = pad_batch(crf, [allowed[i] for i in group], requires_grad=False, device=device)
                emit = emit.masked_fill(allowed_mask == 0, FORBIDDEN)
            alpha, beta, log_z = forward_backward(emit, mask, transitions, start, end)
            marginals = torch.exp(alpha + beta - log_z[:, None, None]) * mask.unsqueeze(-1)
            for b, i in enumerate(group):
                n = lengths[i]
                q = marginals[b, :n]
                counts = pair_expectations(
                    alpha[b, : n - 1],
                    emit[b, 1:n] + beta[b, 1:n] - log_z[b],
                    transitions,
                    torch.ones(n - 1, dtype=torch.float64, device=device),
                )
                # H(q) = log Z - E_q[s(y)] / T; q is 0 where emit is FORBIDDEN (0, not 0 * FORBIDDEN).
                score = (
                    torch.where(q > 0, q * emit[b, :n], 0.0).sum()
                    + (counts * kept[0]).sum()
                    + q[0] @ kept[1]
                    + q[-1] @ kept[2]
                )
                out[i] = SoftTargets(tags, q.cpu().numpy(), counts.cpu().numpy(), float(log_z[b] - score), temperature)
                if pieces is not None and pieces[i] is not None:
                    out[i].pieces = _chain_pieces(
                        alpha[b, :n], beta[b, :n], emit[b, :n], log_z[b], transitions, q, pieces[i]
                    )
    if any(targets is None for targets in out):
        raise ValueError("chain_soft_targets got an empty sequence: leave empty docs out.")
    return out


def _chain_pieces(alpha, beta, emit, log_z, transitions, marginals, ranges) -> Pieces:
    """One chain's marginal over each of ranges: the pair marginals q(y_t-1, y_t) inside the range give its
    expected transition counts and, the marginal of a chain being a chain, its entropy
    H = sum_t H(y_t-1, y_t) - sum_(inner t) H(y_t) (one token: H(y_t)). Memory: one range's pairs."""

    def entropy(p: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
        return -torch.where(p > 0, p * log_p, 0.0).sum()

    n_tags = transitions.shape[0]
    counts = numpy.zeros((len(ranges), n_tags, n_tags))
    entropies = numpy.zeros(len(ranges))
    for k, (start, end) in enumerate(ranges):
        q = marginals[start:end]
        if end - start == 1:
            entropies[k] = float(entropy(q, torch.log(q)))
            continue
        # shape: (end - start - 1, n_tags, n_tags), log q(y_t-1 = i, y_t = j) for t in start + 1 .. end - 1
        log_pairs = (
            alpha[start : end - 1, :, None]
            + transitions
            + (emit[start + 1 : end] + beta[start + 1 : end])[:, None, :]
            - log_z
        )
        pairs = torch.exp(log_pairs)
        counts[k] = pairs.sum(dim=0).cpu().numpy()
        inner = q[1:-1]
        entropies[k] = float(entropy(pairs, log_pairs) - entropy(inner, torch.log(inner)))
    return Pieces(numpy.asarray([end for _, end in ranges], dtype="int64"), counts, entropies)


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
    the student is trained on windows as it predicts in windows, its memory bounded by the window (a
    1M-character line took 9.79 GB at once). A gold entity cut by a window's edge is left unannotated
    (missing, marginalised over) on both sides of the cut."""
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


@dataclasses.dataclass
class DistillSummary:
    """What a distill run did: the teacher pass (annotate's Summary) and where the student is."""

    teacher: Any  # annotate.Summary
    student: Optional[Path]  # OUTPUT/model-best, None when training was not run
    config: Path  # the student's config as trained


def distill(
    teacher: str,
    student_config: Path,
    output: Path,
    *,
    train: Path,
    dev: Path,
    test: Optional[Path] = None,
    texts: Sequence[Any] = (),
    temperature: float = 2.0,
    gold_weight: float = 0.5,
    augment: int = 0,
    max_steps: Optional[int] = None,
    shard_size: int = 10_000,
    batch_size: int = 256,
    engine: str = "local",
    n_process: int = 1,
    gpu_id: int = -1,
    address: Optional[str] = None,
    workers: int = 1,
    gpus_per_worker: float = 0.0,
    overrides: Optional[Dict[str, Any]] = None,
    progress: bool = True,
    train_student: bool = True,
) -> DistillSummary:
    """The teacher's soft targets on the train split's texts and the unlabeled texts (annotate's engine,
    resumable: cached in OUTPUT/teacher/), then the student trained on them by spaCy's training loop
    (OUTPUT/model-best on dev F1, OUTPUT/model-last).

    teacher (str): A trained pipeline (name or path) with a crf_ner.
    student_config (Path): The student's training config (e.g. configs/student.cfg), with one crf_ner.
    output (Path): The output folder.
    train (Path): The train split (.spacy): its texts get soft targets, its gold docs the gold loss.
    dev (Path): The dev split (.spacy): model-best is chosen on it.
    test (Optional[Path]): The test split (.spacy), if any: texts may not hold its texts either.
    texts (Sequence[Path]): Unlabeled text: files, folders or globs as annotate reads them (a .txt with one
        text per line, .jsonl, .parquet, .csv, .tsv); "" is left out. Never a split that will be scored:
        texts found in dev (or test) are refused (check_unlabeled_texts).
    temperature (float): The teacher's and the student's CRF scores are divided by it in the loss. 2.0:
        students at T = 2 against T = 1 were higher on dev on five of six sets (E-commerce 73.49 against 72.86
        over three students, MSRA +1.14) and tied on Resume (bench/results/distill_*_temperature.json); the
        softer targets carry more of the teacher's second choices.
    gold_weight (float): The gold negative log-likelihood's weight beside the KL.
    augment (int): Copies of each train doc with its entities replaced by other mentions of their labels
        (mention_replaced_texts) that the teacher labels too, beside texts (0: none).
    max_steps (Optional[int]): Stop training after this many steps (None: the config's).
    shard_size, batch_size, engine, n_process, gpu_id, address, workers, gpus_per_worker: the teacher
        pass's, as annotate takes them.
    overrides (Optional[Dict[str, Any]]): More config overrides for the student's training.
    progress (bool): A progress bar over the teacher pass (its total counted first).
    train_student (bool): False: the teacher pass only.
    RETURNS (DistillSummary): What was done.
    """
    from spacy.cli.train import train as spacy_train
    from spacy.util import load_config

    from ..annotate import annotate

    output = Path(output)
    folder = output / "teacher"
    held_out = [("dev", dev)] + ([("test", test)] if test is not None else [])
    check_unlabeled_texts(texts, held_out)
    tags = prepare_teacher(teacher, folder, temperature)
    write_teacher_inputs(folder / TEACHER_INPUTS, train, texts, augment, dev, test)
    summary = annotate(
        str(folder / TEACHER_PIPELINE),
        str(folder / TEACHER_INPUTS),
        folder / TEACHER_SHARDS,
        output_format="spacy",
        shard_size=shard_size,
        batch_size=batch_size,
        n_process=n_process,
        gpu_id=gpu_id,
        engine=engine,
        address=address,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        progress=progress,
    )
    config = load_config(student_config)
    name = _crf_ner_name(config, student_config)
    component = config["components"][name]
    for setting in ("join_examples", "replace_mentions"):  # new docs would lose their soft targets
        if component.get(setting):
            component[setting] = 0.0
    config["corpora"]["train"] = {
        "@readers": "spacy-cner.distill_corpus.v1",
        "path": str(folder),
        "gold": "${paths.train}",
        "gold_weight": gold_weight,
    }
    # The teacher's labels in its order and its scheme: the student's tags are the teacher's.
    tag_set = TagSet.from_names(tags)
    component["scheme"] = tag_set.scheme
    config["initialize"].setdefault("components", {}).setdefault(name, {})["labels"] = list(tag_set.labels)
    config_path = output / "student.cfg"
    config.to_disk(config_path)
    if not train_student:
        return DistillSummary(summary, None, config_path)
    settings = {"paths.train": str(train), "paths.dev": str(dev), **(overrides or {})}
    if max_steps is not None:
        settings["training.max_steps"] = max_steps
        settings.update(evaluation_within(config, settings, max_steps))
    spacy_train(config_path, output, use_gpu=gpu_id if engine == "local" else -1, overrides=settings)
    warn_if_untrained_best(output)
    return DistillSummary(summary, output / "model-best", config_path)


def evaluation_within(config: Any, settings: Dict[str, Any], max_steps: int) -> Dict[str, Any]:
    """The override that evaluates the student at its last step when max_steps comes before the
    config's first evaluation after step 0: spaCy's loop evaluates at step 0 and every eval_frequency
    steps, so otherwise the only checkpoint scored is the untrained student and model-best is it."""
    every = int(settings.get("training.eval_frequency", config["training"].get("eval_frequency", 200)))
    if max_steps <= 0 or max_steps >= every:
        return {}
    msg.info(
        f"distill: --max-steps {max_steps} before the config's eval_frequency {every}: evaluating at step {max_steps}"
    )
    return {"training.eval_frequency": max_steps}


def warn_if_untrained_best(output: Path) -> None:
    """Warn when model-best is the student at step 0 (no later evaluation scored higher), read from the
    training curve that spacy-cner.PlotLogger.v1 writes (a config with another logger is not checked)."""
    curve = output / "training_curve.jsonl"
    if not curve.exists():
        return
    rows = [row for row in srsly.read_jsonl(curve) if row.get("score") is not None]
    if not rows:
        return
    # spaCy's loop copies model-last to model-best at every evaluation scoring at least the best so far.
    best = max(rows, key=lambda row: (row["score"], row["step"]))
    if best["step"] == 0:
        msg.warn(
            f"distill: {output / 'model-best'} is the untrained student of step 0: no later evaluation "
            f"on dev scored above its {best['score']:.3f} (last step {rows[-1]['step']}). Train longer "
            f"(--max-steps) or use {output / 'model-last'}."
        )


def prepare_teacher(teacher: str, folder: Path, temperature: float) -> List[str]:
    """The teacher pipeline with a crf_ner_soft_targets step after its crf_ner (which is disabled: the step
    reads its model), saved once in folder/pipeline, and teacher.json (the teacher's fingerprint, the
    temperature, the tags). A folder made from another teacher or temperature is refused: its shards
    would mix two teachers.

    RETURNS (List[str]): The teacher's tag names.
    """
    import spacy

    from ..annotate.resume import model_fingerprint

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


def check_unlabeled_texts(texts: Sequence[Any], splits: Sequence[Tuple[str, Path]]) -> None:
    """Refuse unlabeled texts that are texts of a held-out split (dev, test), naming how many and where:
    the student would learn the teacher's answers on the texts it is chosen (or scored) on. Texts are
    compared with their surrounding whitespace left out; one pass over the texts, as annotate reads them.

    texts (Sequence[Any]): Files, folders or globs, as distill's texts ("" is left out).
    splits (Sequence[Tuple[str, Path]]): (name, .spacy file) of each held-out split.
    """
    from ..annotate.inputs import find_sources, read_rows

    vocab = Vocab()
    held_out: Dict[str, str] = {}
    for name, path in splits:
        for doc in DocBin().from_disk(path).get_docs(vocab):
            held_out.setdefault(doc.text.strip(), f"{name} ({path})")
    held_out.pop("", None)
    found: Dict[Tuple[str, str], List[Any]] = {}  # (file, split) -> [count, first "file, line N"]
    for text in texts:
        for source in find_sources(str(text)) if str(text) else ():
            for index, row in enumerate(read_rows(source, "entities")):
                split = held_out.get(row.text.strip()) if row.error is None else None
                if split is not None:
                    entry = found.setdefault((str(source.path), split), [0, source.where(index)])
                    entry[0] += 1
    if found:
        total = sum(count for count, _ in found.values())
        where = "; ".join(
            f"{count} in {path} of {split}, the first at {first.rsplit(', ', 1)[1]}"
            for (path, split), (count, first) in found.items()
        )
        raise ValueError(
            f"--text holds {total} texts of the held-out splits ({where}): the student would learn the teacher's "
            "answers on the texts it is chosen or scored on. Remove them from the unlabeled text."
        )


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

    from ..annotate.inputs import find_sources
    from .augment import mention_replaced_texts

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


def _crf_ner_name(config: Any, path: Path) -> str:
    names = [name for name, block in config["components"].items() if block.get("factory") == "crf_ner"]
    if len(names) != 1:
        raise ValueError(f"The student config {path} must have one crf_ner component, it has {len(names)}.")
    return names[0]
