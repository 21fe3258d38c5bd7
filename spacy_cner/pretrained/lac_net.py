"""LAC's BiGRU-CRF (LAC/nets.py, `lex_net`) as plain torch modules, filled from its paddle tensor files.

What must match paddle exactly (paddle/phi/kernels/funcs/gru_compute.cc and detail/gru_kernel.h, the fluid
`gru` op that `dynamic_gru` builds, and `crf_decoding`):
- the fc before each GRU gives all three gate inputs [update | reset | candidate] (x W_fc + b_fc), the GRU's
  own bias [1, 3H] is added to them;
- the GRU weight [H, 3H] is one buffer read as two matrices: its first 2H*H floats are the update and reset
  weights as an [H, 2H] matrix, the next H*H the candidate's [H, H] (not the column blocks of [H, 3H]);
- the candidate reads the reset hidden state: c = tanh(x_c + (r * h_prev) W_c), and with origin_mode False
  h = (1 - u) * h_prev + u * c; h_0 = 0; is_reverse runs each sequence from its end;
- sigmoid clips its input to [-40, 13] and tanh(x) = 2 sigmoid(2x) - 1 (paddle's CPU kernels);
- crfw [T + 2, T]: row 0 start scores, row 1 end scores, rows 2.. transitions from (row) to (column);
  Viterbi keeps the first best on ties.
"""

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy
import torch
from torch import nn

from ..backends.viterbi import viterbi_paths

# paddle's SIGMOID_THRESHOLD_MIN / MAX (paddle/phi/kernels/funcs/detail/activation_functions.h).
SIGMOID_MIN, SIGMOID_MAX = -40.0, 13.0
# paddle's tanh clips 2x to them: x to half of each.
_TANH_MIN, _TANH_MAX = SIGMOID_MIN / 2, SIGMOID_MAX / 2


def paddle_sigmoid(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x.clamp(SIGMOID_MIN, SIGMOID_MAX))


def paddle_tanh(x: torch.Tensor) -> torch.Tensor:
    return 2.0 * paddle_sigmoid(2.0 * x) - 1.0


class PaddleGRU(nn.Module):
    """One direction of fluid's dynamic_gru (origin_mode False) over gate inputs projected by the fc before it.

    hidden_width (int): H.
    reverse (bool): Run each sequence from its last item to its first (is_reverse).
    """

    def __init__(self, hidden_width: int, reverse: bool = False):
        super().__init__()
        self.hidden_width = hidden_width
        self.reverse = reverse
        self.gate_weight = nn.Parameter(torch.zeros(hidden_width, 2 * hidden_width), requires_grad=False)
        self.state_weight = nn.Parameter(torch.zeros(hidden_width, hidden_width), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(3 * hidden_width), requires_grad=False)

    def load_paddle(self, weight: numpy.ndarray, bias: numpy.ndarray) -> None:
        """Fill from gru_N.w_0 [H, 3H] and gru_N.b_0 [1, 3H] (the buffer layout in the module docstring)."""
        H = self.hidden_width
        flat = torch.from_numpy(numpy.array(weight, dtype="float32")).reshape(-1)
        self.gate_weight.data.copy_(flat[: 2 * H * H].reshape(H, 2 * H))
        self.state_weight.data.copy_(flat[2 * H * H :].reshape(H, H))
        self.bias.data.copy_(torch.from_numpy(numpy.array(bias, dtype="float32")).reshape(-1))

    def forward(self, gate_inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """gate_inputs (batch, length, 3H) and lengths (batch,) -> hidden states (batch, length, H); positions
        at or past a sequence's length hold values no caller should read."""
        if self.reverse:
            gate_inputs = flip_within(gate_inputs, lengths)
        H = self.hidden_width
        gate_inputs = gate_inputs + self.bias
        hidden = gate_inputs.new_zeros(gate_inputs.shape[0], H)
        outputs = []
        for step in range(gate_inputs.shape[1]):
            x = gate_inputs[:, step]  # shape: (batch, 3H)
            update_reset = paddle_sigmoid(x[:, : 2 * H] + hidden @ self.gate_weight)
            update, reset = update_reset[:, :H], update_reset[:, H:]
            candidate = paddle_tanh(x[:, 2 * H :] + (reset * hidden) @ self.state_weight)
            hidden = hidden - update * hidden + update * candidate  # gru_finalOutput, origin_mode False
            outputs.append(hidden)
        output = torch.stack(outputs, dim=1) if outputs else gate_inputs[..., :H]
        return flip_within(output, lengths) if self.reverse else output


class BiGRULayer(nn.Module):
    """nets.py `_bigru_layer`: fc -> GRU forward and fc -> GRU reversed, concatenated (forward first)."""

    def __init__(self, input_width: int, hidden_width: int):
        super().__init__()
        self.forward_fc = nn.Linear(input_width, 3 * hidden_width)
        self.forward_gru = PaddleGRU(hidden_width)
        self.backward_fc = nn.Linear(input_width, 3 * hidden_width)
        self.backward_gru = PaddleGRU(hidden_width, reverse=True)
        for parameter in self.parameters():
            parameter.requires_grad_(False)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Both directions in one loop over the steps, each step one batched product per gate group for both
        (PaddleGRU's arithmetic, in the same order): half the steps' fixed cost of running them one after the other.

        The backward direction reads the padded time axis from its end (a plain flip) with its state held at
        zero on the padding, so each sequence starts from h_0 = 0 at its own last item, as reversing it within
        its length does (flip_within), without flip_within's gathers (a fifth of the layer's time).
        Where a gradient is needed (a fine-tuned LAC), the steps run as BiGRUScan: the same forward, a
        hand-written backward."""
        forward_gru, backward_gru = self.forward_gru, self.backward_gru
        steps = inputs.shape[1]
        batch, width = inputs.shape[0], inputs.shape[2]
        # shape: (2, batch, length, 3H): both fcs as one batched product, the backward direction's over the input
        # read from its last padded position back (flipped before the fc: a third of the values to move).
        stacked = torch.stack([inputs, inputs.flip(1)]).reshape(2, batch * steps, width)
        fc_weight = torch.stack([self.forward_fc.weight, self.backward_fc.weight]).transpose(1, 2)
        fc_bias = torch.stack([self.forward_fc.bias + forward_gru.bias, self.backward_fc.bias + backward_gru.bias])
        gate_inputs = torch.baddbmm(fc_bias.unsqueeze(1), stacked, fc_weight).reshape(2, batch, steps, fc_bias.shape[1])
        gate_weight = torch.stack([forward_gru.gate_weight, backward_gru.gate_weight])  # shape: (2, H, 2H)
        state_weight = torch.stack([forward_gru.state_weight, backward_gru.state_weight])  # shape: (2, H, H)
        # shape: (length, batch, 1): 1 where step t's backward position, length - 1 - t, is inside the sequence.
        positions = torch.arange(steps - 1, -1, -1, device=inputs.device).unsqueeze(1)
        inside = (positions < lengths.unsqueeze(0)).unsqueeze(2).to(gate_inputs.dtype)
        if torch.is_grad_enabled() and (gate_inputs.requires_grad or gate_weight.requires_grad):
            outputs = BiGRUScan.apply(gate_inputs, gate_weight, state_weight, inside)
        else:
            outputs = gru_steps(gate_inputs, gate_weight, state_weight, inside)[0]
        # shape: (batch, length, 2H), contiguous, from the steps' (length, 2, batch, H).
        return torch.cat([outputs[:, 0].transpose(0, 1), outputs[:, 1].flip(0).transpose(0, 1)], dim=-1)


def gru_steps(
    gate_inputs: torch.Tensor,
    gate_weight: torch.Tensor,
    state_weight: torch.Tensor,
    inside: torch.Tensor,
    keep: bool = False,
) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """The recurrence of both directions of a BiGRULayer (module docstring: paddle's gates, clips and order).

    gate_inputs (2, batch, length, 3H): the fc outputs plus the GRU bias, the backward direction's flipped.
    gate_weight (2, H, 2H), state_weight (2, H, H): each direction's recurrent weights.
    inside (length, batch, 1): 1 where the backward direction's step is inside its sequence (its state is held
        at zero elsewhere).
    keep (bool): Also return what the backward pass reads (else None, None).
    RETURNS: time first, the states (length, 2, batch, H) and, with keep, the update and reset gates
        (length, 2, batch, 2H) and the candidates (length, 2, batch, H) of every step.
    """
    H = state_weight.shape[-1]
    directions, batch, steps, _ = gate_inputs.shape
    hidden = gate_inputs.new_zeros(directions, batch, H)
    # The steps' views taken once (unbind), not sliced anew at each step: at a batch of one text each step's
    # handful of small operations costs more in torch's per-call overhead than in arithmetic.
    gate_parts = gate_inputs[..., : 2 * H].unbind(2)
    candidate_parts = gate_inputs[..., 2 * H :].unbind(2)
    # No padding (one text, or texts of one length): the backward direction's state needs no holding at zero.
    masks = None if bool(inside.all()) else inside.unbind(0)
    states, gates, candidates = [], [], []
    for step in range(steps):
        update_reset = torch.baddbmm(gate_parts[step], hidden, gate_weight).clamp_(SIGMOID_MIN, SIGMOID_MAX).sigmoid_()
        update, reset = update_reset[..., :H], update_reset[..., H:]
        # paddle_tanh, 2 sigmoid(clip(2 x)) - 1, is tanh(clip(x)) at half the clips, within float32 rounding.
        candidate = torch.baddbmm(candidate_parts[step], reset * hidden, state_weight)
        candidate.clamp_(_TANH_MIN, _TANH_MAX).tanh_()
        hidden = torch.lerp(hidden, candidate, update)  # h + u (c - h): gru_finalOutput, origin_mode False
        if masks is not None:
            hidden[1].mul_(masks[step])
        states.append(hidden)
        if keep:
            gates.append(update_reset)
            candidates.append(candidate)
    outputs = torch.stack(states) if states else gate_inputs.new_empty(0, directions, batch, H)
    if not keep:
        return outputs, None, None
    empty = gate_inputs.new_empty(0, directions, batch, H)
    return (
        outputs,
        torch.stack(gates) if gates else empty.new_empty(0, directions, batch, 2 * H),
        torch.stack(candidates) if candidates else empty,
    )


# The gates' values at paddle's clips: the clip's gradient is zero beyond them.
_GATE_LOW, _GATE_HIGH = torch.sigmoid(torch.tensor([SIGMOID_MIN, SIGMOID_MAX])).tolist()
_CANDIDATE_LOW, _CANDIDATE_HIGH = torch.tanh(torch.tensor([_TANH_MIN, _TANH_MAX])).tolist()


class BiGRUScan(torch.autograd.Function):
    """gru_steps with its gradient written by hand (backpropagation through time).

    Why not autograd over gru_steps' loop: autograd records every step's dozen small operations and
    replays them one by one (and refuses the in-place gates the forward writes); here the backward is one
    loop of batched products per step, and the weights' gradients are two products over all steps at the end.
    """

    @staticmethod
    def forward(ctx, gate_inputs, gate_weight, state_weight, inside):
        outputs, gates, candidates = gru_steps(gate_inputs, gate_weight, state_weight, inside, keep=True)
        ctx.save_for_backward(gate_weight, state_weight, inside, outputs, gates, candidates)
        return outputs

    @staticmethod
    def backward(ctx, d_outputs):
        gate_weight, state_weight, inside, outputs, gates, candidates = ctx.saved_tensors
        H = state_weight.shape[-1]
        steps, directions, batch, _ = outputs.shape
        # shape: (length, 2, batch, H): each step's previous state (h_0 = 0).
        previous = torch.cat([outputs.new_zeros(1, directions, batch, H), outputs[:-1]])
        update, reset = gates[..., :H], gates[..., H:]
        # What each step's gradient reads from the forward, for all steps at once (a few large operations, not
        # a dozen small ones a step): h' = h + u (c - h), c = tanh(b) with dc/db = 1 - c^2 and the gates'
        # g (1 - g), each zero beyond paddle's clips.
        candidate_slope = (1.0 - candidates * candidates).masked_fill_(
            (candidates <= _CANDIDATE_LOW) | (candidates >= _CANDIDATE_HIGH), 0.0
        )
        candidate_slope.mul_(update)
        gate_slope = (gates * (1.0 - gates)).masked_fill_((gates <= _GATE_LOW) | (gates >= _GATE_HIGH), 0.0)
        keep_slope = 1.0 - update
        update_input = candidates - previous
        masks = None if bool(inside.all()) else inside.unbind(0)
        d_gate_inputs = outputs.new_empty(steps, directions, batch, 3 * H)
        d_update_resets = d_gate_inputs[..., : 2 * H].unbind(0)
        d_updates = d_gate_inputs[..., :H].unbind(0)
        d_resets = d_gate_inputs[..., H : 2 * H].unbind(0)
        d_candidates = d_gate_inputs[..., 2 * H :].unbind(0)
        d_steps = d_outputs.unbind(0)
        candidate_slopes, gate_slopes, keep_slopes, update_inputs, resets, previous_states = (
            values.unbind(0) for values in (candidate_slope, gate_slope, keep_slope, update_input, reset, previous)
        )
        gate_weight_t, state_weight_t = gate_weight.transpose(1, 2), state_weight.transpose(1, 2)
        d_hidden = outputs.new_zeros(directions, batch, H)
        for step in range(steps - 1, -1, -1):
            d_state = d_steps[step] + d_hidden
            if masks is not None:
                d_state[1].mul_(masks[step])
            torch.mul(d_state, candidate_slopes[step], out=d_candidates[step])
            d_reset_hidden = torch.bmm(d_candidates[step], state_weight_t)  # shape: (2, batch, H)
            torch.mul(d_state, update_inputs[step], out=d_updates[step])
            torch.mul(d_reset_hidden, previous_states[step], out=d_resets[step])
            d_update_resets[step].mul_(gate_slopes[step])
            d_hidden = torch.addcmul(d_state * keep_slopes[step], d_reset_hidden, resets[step])
            d_hidden = torch.baddbmm(d_hidden, d_update_resets[step], gate_weight_t)
        d_gate_weight = d_state_weight = None
        if ctx.needs_input_grad[1]:  # sum over steps and batch of h^T d(update, reset)
            d_gate_weight = torch.einsum("tdbh,tdbg->dhg", previous, d_gate_inputs[..., : 2 * H])
        if ctx.needs_input_grad[2]:  # of (r * h)^T d(candidate)
            d_state_weight = torch.einsum("tdbh,tdbg->dhg", reset * previous, d_gate_inputs[..., 2 * H :])
        return d_gate_inputs.permute(1, 2, 0, 3), d_gate_weight, d_state_weight, None


class LacNetwork(nn.Module):
    """LAC's lexer network (either the tagger or the segmenter): embedding, two BiGRU layers, the emission
    fc and the CRF transitions, with the sizes fixed at construction so a state dict loads into it.

    vocab_size (int): Rows of word_emb.
    input_width (int): Width of word_emb.
    hidden_width (int): Width of each GRU.
    tag_count (int): Tags of the CRF.
    """

    def __init__(self, vocab_size: int, input_width: int, hidden_width: int, tag_count: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, input_width)
        self.layers = nn.ModuleList([BiGRULayer(input_width, hidden_width), BiGRULayer(2 * hidden_width, hidden_width)])
        self.emission = nn.Linear(2 * hidden_width, tag_count)
        self.crf_weights = nn.Parameter(torch.zeros(tag_count + 2, tag_count))
        for parameter in self.parameters():
            parameter.requires_grad_(False)

    @classmethod
    def from_paddle(cls, tensors: Dict[str, numpy.ndarray]) -> "LacNetwork":
        """The network of one model's tensor files (LacFiles.network), sizes read from them."""
        vocab_size, input_width = tensors["word_emb"].shape
        hidden_width = tensors["gru_0.w_0"].shape[0]
        network = cls(vocab_size, input_width, hidden_width, tensors["fc_4.w_0"].shape[1])
        network.load_paddle(tensors)
        return network

    def load_paddle(self, tensors: Dict[str, numpy.ndarray]) -> None:
        def tensor(name: str) -> torch.Tensor:
            return torch.from_numpy(numpy.array(tensors[name], dtype="float32"))

        self.embedding.weight.data.copy_(tensor("word_emb"))
        for index, (layer, direction) in enumerate((l, d) for l in self.layers for d in ("forward", "backward")):
            fc, gru = getattr(layer, f"{direction}_fc"), getattr(layer, f"{direction}_gru")
            fc.weight.data.copy_(tensor(f"fc_{index}.w_0").T)  # paddle's mul: x [N, in] @ w [in, out]
            fc.bias.data.copy_(tensor(f"fc_{index}.b_0"))
            gru.load_paddle(tensors[f"gru_{index}.w_0"], tensors[f"gru_{index}.b_0"])
        self.emission.weight.data.copy_(tensor("fc_4.w_0").T)
        self.emission.bias.data.copy_(tensor("fc_4.b_0"))
        self.crf_weights.data.copy_(tensor("crfw"))

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """ids (batch, length) and lengths (batch,) -> emission scores (batch, length, tags)."""
        return self.encode(ids, lengths)[1]

    def encode(self, ids: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """ids (batch, length) and lengths (batch,) -> the top BiGRU layer's states (batch, length, 2H), forward
        direction first, and the emission scores (batch, length, tags); padding rows hold values no caller
        should read."""
        states = self.layer_states(ids, lengths)
        return states[-1], self.emission(states[-1])

    def layer_states(
        self,
        ids: torch.Tensor,
        lengths: torch.Tensor,
        between: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
    ) -> List[torch.Tensor]:
        """ids (batch, length) and lengths (batch,) -> every layer's output: the id embeddings (batch, length,
        input_width), then each BiGRU layer's states (batch, length, 2H). between, if given, maps the first
        BiGRU layer's states before the second reads them (LEBERT's adapter after layer 1), and the list holds
        its output in their place."""
        states = [self.embedding(ids)]
        for index, layer in enumerate(self.layers):
            hidden = layer(states[-1], lengths)
            if between is not None and index == 0:
                hidden = between(hidden)
            states.append(hidden)
        return states

    def set_trainable(self, embeddings: bool, layers: Sequence[bool], emission: bool) -> None:
        """Which weights take a gradient (none at construction): the id embeddings, each BiGRU layer, the
        emission fc. The CRF's transitions never do (crf_ner has its own CRF)."""
        self.embedding.weight.requires_grad_(embeddings)
        for layer, trained in zip(self.layers, layers):
            for parameter in layer.parameters():
                parameter.requires_grad_(trained)
        for parameter in self.emission.parameters():
            parameter.requires_grad_(emission)

    @torch.no_grad()
    def decode(self, sequences: Sequence[Sequence[int]]) -> List[List[int]]:
        """The best tag ids of each id sequence (crf_decoding); an empty sequence gives []."""
        lengths = [len(ids) for ids in sequences]
        if not sequences or max(lengths) == 0:
            return [[] for _ in sequences]
        padded = torch.zeros(len(sequences), max(lengths), dtype=torch.long)
        for row, ids in enumerate(sequences):
            padded[row, : len(ids)] = torch.as_tensor(list(ids), dtype=torch.long)
        length_tensor = torch.as_tensor(lengths, dtype=torch.long)
        emissions = self.forward(padded, length_tensor)
        return viterbi_decode(emissions, self.crf_weights, length_tensor)


def viterbi_decode(emissions: torch.Tensor, crf_weights: torch.Tensor, lengths: torch.Tensor) -> List[List[int]]:
    """paddle's crf_decoding (linear_chain_crf's layout) over a padded batch, by backends.viterbi.

    emissions (torch.Tensor): (batch, length, tags).
    crf_weights (torch.Tensor): (tags + 2, tags): start row, end row, transitions.
    lengths (torch.Tensor): (batch,) real lengths.
    RETURNS (List[List[int]]): The best path of each sequence, first best on ties (as paddle).
    """
    start, end, transitions = crf_weights[0], crf_weights[1], crf_weights[2:]
    paths = viterbi_paths(emissions, lengths.cpu().numpy(), start, transitions, end)
    return [path.tolist() for path in paths]


def flip_within(values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each sequence of (batch, length, width) reversed within its own length, padding left in place."""
    positions = torch.arange(values.shape[1], device=values.device).unsqueeze(0)  # shape: (1, length)
    index = torch.where(positions < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - positions, positions)
    return values.gather(1, index.unsqueeze(2).expand(-1, -1, values.shape[2]))
