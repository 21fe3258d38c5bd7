"""Adversarial training on the embeddings: FGM (Miyato et al. 2017) and FGSM (Goodfellow et al. 2015).

The NEZHA-BiLSTM-CRF paper's AT: after the clean backward pass, the embedding
matrices are moved along their gradient, r = epsilon * g / ||g||_2 (FGM) or
r = epsilon * sign(g) (FGSM); a second forward/backward pass on the perturbed
embeddings adds its gradients to the clean ones, the embeddings are restored,
and the optimizer takes one step with both.

The perturbed matrices are the input embeddings of every Hugging Face model in the
pipe (`get_input_embeddings()`), every thinc HashEmbed table (the character and
bigram embeddings of the CPU configs, spaCy's MultiHashEmbed), every exact table
(spacy-cner.KeyEmbed.v1: the rows the batch touched, its gradient's only non-zero ones) and the trained word
table of a lexicon adapter (frozen lexicon vectors have no gradient and stay put).
"""

import random
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch
from spacy.util import registry
from thinc.api import Model

from ..layers.key_embed import touched_rows


@registry.misc("spacy-cner.fgm.v1")
def fgm(
    epsilon: float = 1.0, every: int = 1, large_corpus: int = 0, large_every: int = 1, share: float = 1.0
) -> "EmbeddingAttack":
    """FGM: perturb each embedding matrix by epsilon * g / ||g||_2.

        [components.crf_ner.adversarial]
        @misc = "spacy-cner.fgm.v1"
        epsilon = 3.0
        every = 1
        large_corpus = 1500000
        large_every = 2
        share = 1.0

    epsilon (float): The perturbation's L2 norm per matrix.
    every (int): Attack at every this many updates (1: each; 2 halves the second passes' cost).
    large_corpus (int): A train corpus of more than this many tokens (counted by crf_ner's
        initialize, logged and saved in its cfg) is attacked at every large_every-th update
        instead; 0: never.
    large_every (int): `every` on a large corpus.
    share (float): The share of the batch's examples the second pass runs on (drawn at random each
        update, its gradient scaled by 1 / the share it took, so that it stands for the whole batch's);
        the perturbation comes from the whole batch's clean gradient. 1: the whole batch. On the CPU
        default a share saves less of a step than it leaves out (the BiLSTM's time follows the sequence
        length more than the batch) and costs test F1: BENCHMARKS.md#training.
    RETURNS (EmbeddingAttack): The attack, for the crf_ner setting `adversarial`.
    """
    return EmbeddingAttack("fgm", epsilon, every, large_corpus, large_every, share)


@registry.misc("spacy-cner.fgsm.v1")
def fgsm(
    epsilon: float = 0.01, every: int = 1, large_corpus: int = 0, large_every: int = 1, share: float = 1.0
) -> "EmbeddingAttack":
    """FGSM: perturb each embedding matrix by epsilon * sign(g).

    epsilon (float): The perturbation of every entry with a non-zero gradient.
    every (int): Attack at every this many updates (1: each).
    large_corpus (int): As spacy-cner.fgm.v1's: above this many train tokens, large_every; 0: never.
    large_every (int): `every` on a large corpus.
    share (float): As spacy-cner.fgm.v1's: the share of the batch the second pass runs on.
    RETURNS (EmbeddingAttack): The attack, for the crf_ner setting `adversarial`.
    """
    return EmbeddingAttack("fgsm", epsilon, every, large_corpus, large_every, share)


@dataclass(frozen=True)
class EmbeddingAttack:
    """A gradient-based perturbation of a model's embedding matrices."""

    method: str
    epsilon: float
    # The attack runs at updates 0, every, 2 * every, ... of a training (counted by the pipe).
    every: int = 1
    # On a train corpus of more than large_corpus tokens (0: none is large), at every large_every-th.
    large_corpus: int = 0
    large_every: int = 1
    # The share of a batch's examples the second pass runs on (1: all of them).
    share: float = 1.0

    def __post_init__(self):
        if self.method not in ("fgm", "fgsm"):
            raise ValueError(f"Unknown adversarial method {self.method!r}: use 'fgm' or 'fgsm'.")
        if not self.epsilon > 0:
            raise ValueError(f"Adversarial epsilon must be positive, got {self.epsilon}.")
        for name in ("every", "large_every"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"Adversarial `{name}` must be a whole number of updates, at least 1, got {value!r}.")
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"Adversarial `share` is the share of a batch attacked, in (0, 1], got {self.share!r}.")
        if not (isinstance(self.large_corpus, int) and self.large_corpus >= 0):
            raise ValueError(
                f"Adversarial `large_corpus` must be a number of tokens >= 0 (0: no corpus is large), "
                f"got {self.large_corpus!r}."
            )

    def every_for(self, corpus_tokens: Optional[int]) -> int:
        """`every` for a train corpus of this many tokens: large_every above large_corpus
        (when large_corpus is set), else every; None (not counted): every."""
        if corpus_tokens is not None and self.large_corpus and corpus_tokens > self.large_corpus:
            return self.large_every
        return self.every

    def applies(self, update: int, every: Optional[int] = None) -> bool:
        """Whether the attack runs at this update (0-based, counted by the pipe).

        every (Optional[int]): The pipe's every_for its train corpus; None: `every`.
        """
        return update % (every or self.every) == 0

    def attacked(self, n: int) -> Optional[List[int]]:
        """The indices of a batch of n examples the second pass runs on, in order: a random
        max(1, round(n * share)) of them (Python's `random`, seeded by spaCy's training); None: all."""
        k = max(1, round(n * self.share))
        return None if k >= n else sorted(random.sample(range(n), k))

    def perturbation(self, xp, gradient):
        """r for one matrix's gradient: FGM's scaled unit vector or FGSM's signs (xp: numpy, cupy or torch)."""
        # An overflowed gradient (inf or nan: mixed precision at a too large loss scale, a step the
        # grad scaler skips) gets no attack: gradient * 0 would be nan where it is inf.
        if self.method == "fgsm":
            if not bool(xp.isfinite(gradient).all()):
                return xp.zeros_like(gradient)
            return self.epsilon * xp.sign(gradient)
        norm = float((gradient * gradient).sum()) ** 0.5
        # A finite norm means finite entries: the extra pass over the matrix only when it is not.
        if norm == 0.0 or norm != norm or (norm == float("inf") and not bool(xp.isfinite(gradient).all())):
            return xp.zeros_like(gradient)
        if norm == float("inf"):  # finite entries whose squares overflow: scale before squaring
            gradient = gradient / float(abs(gradient).max())
            norm = float((gradient * gradient).sum()) ** 0.5
        return gradient * (self.epsilon / norm)

    def perturb(self, model: Model) -> Callable[[], None]:
        """Add the perturbation to every embedding matrix with a gradient.

        model (Model): The pipe's model, after the clean backward pass.
        RETURNS (Callable[[], None]): Puts the saved matrices back, bit for bit.
        """
        restores: List[Callable[[], None]] = []
        for node in model.walk():
            if node.name == "hashembed" and node.has_grad("E"):
                table = node.get_param("E")
                node.set_param("E", table + self.perturbation(node.ops.xp, node.get_grad("E")))
                restores.append(lambda node=node, table=table: node.set_param("E", table))
            elif node.name == "key_embed" and node.has_grad("E"):
                # An exact table's gradient is zero outside the rows the batch touched: move those.
                rows = touched_rows(node)
                if rows is not None:
                    table = node.get_param("E")
                    saved = table[rows].copy()
                    table[rows] += self.perturbation(node.ops.xp, node.get_grad("E")[rows])
                    restores.append(lambda table=table, rows=rows, saved=saved: table.__setitem__(rows, saved))
            for shim in node.shims:
                get_embeddings = getattr(shim._model, "get_input_embeddings", None)
                if not callable(get_embeddings):
                    continue
                embeddings = get_embeddings()
                weight = None if embeddings is None else embeddings.weight
                if weight is None or weight.grad is None:
                    continue
                with torch.no_grad():
                    if weight.grad.is_sparse:
                        # A sparse gradient (a fine-tuned LAC's 58,224 x 128 table): only the rows the batch read
                        # move, by the same perturbation, without a pass over the whole table.
                        gradient = weight.grad.coalesce()
                        rows = gradient.indices()[0]
                        saved = weight[rows].clone()
                        weight[rows] += self.perturbation(torch, gradient.values().float()).to(weight.dtype)
                        restores.append(lambda weight=weight, rows=rows, saved=saved: _copy_rows(weight, rows, saved))
                        continue
                    saved = weight.detach().clone()
                    weight.add_(self.perturbation(torch, weight.grad.float()).to(weight.dtype))
                restores.append(lambda weight=weight, saved=saved: _copy_into(weight, saved))
        if not restores:
            raise ValueError(
                f"Adversarial training ({self.method}) found no embedding matrix with a gradient "
                "in the model: it perturbs HashEmbed tables and Hugging Face input embeddings "
                "inside the pipe's own model (not an upstream tok2vec or transformer it listens to)."
            )

        def restore() -> None:
            for undo in restores:
                undo()

        return restore

    def attack(self, model: Model, step: Callable[[], float]) -> float:
        """Run a training step on the perturbed model (FGM/FGSM's second pass, its gradients added
        to the clean pass's), then put the embeddings back.

        model (Model): The pipe's model, after the clean backward pass.
        step (Callable[[], float]): Forward, loss and backward; returns the loss.
        RETURNS (float): The loss on the perturbed model.
        """
        restore = self.perturb(model)
        try:
            return step()
        finally:
            restore()


def _copy_into(weight: torch.Tensor, saved: torch.Tensor) -> None:
    with torch.no_grad():
        weight.copy_(saved)


def _copy_rows(weight: torch.Tensor, rows: torch.Tensor, saved: torch.Tensor) -> None:
    with torch.no_grad():
        weight[rows] = saved
