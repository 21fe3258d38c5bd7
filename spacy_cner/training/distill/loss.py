"""The teacher-student loss of distillation: a small `crf_ner` (the student) learns a trained `crf_ner`'s
(the teacher's) distribution over tag sequences.

The teacher's soft targets (SoftTargets) come from the forward-backward pass that gives ent._.score, at a
temperature T: each token's tag marginals q_t, the expected transition counts C[i, j] = sum_t q(y_t-1 = i,
y_t = j), and the entropy H(q) of its distribution over sequences. The student's loss is the KL divergence
of its CRF (at the same T) from the teacher's, over whole tag sequences, times T^2 (Hinton et al. 2015,
sec. 2):

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

crf_ner's get_teacher_student_loss calls teacher_student_loss for the examples whose predicted doc carries
soft targets (doc.user_data[SOFT_TARGETS], soft_targets); this is the only module of distill the pipe
imports.
"""

import dataclasses
from typing import List, Optional, Sequence, Tuple

import numpy
import torch
from spacy.training import Example
from thinc.api import Model, torch2xp
from thinc.types import Floats1d, Floats2d
from torch.nn.utils import parametrize

from ...backends.forward_backward import forward_backward, transition_expectations
from ...layers._torch import pad_batch, torch_module
from ...layers.crf import FORBIDDEN
from ...tags import allowed_transitions

# The doc.user_data key of a doc's soft targets: a SoftTargets in training, a record (soft_targets_record)
# in the teacher's shards.
SOFT_TARGETS = "spacy_cner.soft_targets"


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
        student_counts = transition_expectations(alpha, beta, emit, log_z, mask, transitions, weight)
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
