"""LAC's networks in torch (lac_net.py) and its text handling (lac_analyzer.py), checked against references:
paddle's GRU step by step in numpy, Viterbi by brute force, LAC's segmenter and tag reading on small cases."""

import itertools
import math

import numpy
import pytest
import torch

from spacy_cner.pretrained.lac_analyzer import DictionarySegmenter, LacSegmenter, LacTagger, Lexicon
from spacy_cner.pretrained.lac_net import BiGRULayer, LacNetwork, PaddleGRU, flip_within, viterbi_decode

from test_lac_pipeline import LAC_TAGS, SEG_TAGS, fake_network_tensors


def numpy_sigmoid(x):
    return 1.0 / (1.0 + numpy.exp(-numpy.clip(x, -40.0, 13.0)))


def reference_gru(gate_inputs, weight, bias, reverse):
    """fluid's gru op (origin_mode False), one step at a time in float64: the weight buffer read as [H, 2H]
    (update, reset) then [H, H] (candidate); the candidate over r * h_prev; paddle's clipped activations."""
    H = weight.shape[0]
    flat = weight.astype("float64").reshape(-1)
    update_reset_weight, candidate_weight = flat[: 2 * H * H].reshape(H, 2 * H), flat[2 * H * H :].reshape(H, H)
    hidden = numpy.zeros(H)
    outputs = numpy.zeros((len(gate_inputs), H))
    for step in reversed(range(len(gate_inputs))) if reverse else range(len(gate_inputs)):
        x = gate_inputs[step] + bias.reshape(-1)
        update = numpy_sigmoid(x[:H] + hidden @ update_reset_weight[:, :H])
        reset = numpy_sigmoid(x[H : 2 * H] + hidden @ update_reset_weight[:, H:])
        candidate = 2.0 * numpy_sigmoid(2.0 * (x[2 * H :] + (reset * hidden) @ candidate_weight)) - 1.0
        hidden = (1.0 - update) * hidden + update * candidate
        outputs[step] = hidden
    return outputs


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_matches_paddles_step_by_step_reference_in_a_padded_batch(reverse):
    rng = numpy.random.default_rng(0)
    H, lengths = 3, [5, 2, 0, 4]
    weight = rng.normal(0, 0.8, (H, 3 * H)).astype("float32")
    bias = rng.normal(0, 0.5, (1, 3 * H)).astype("float32")
    gate_inputs = rng.normal(0, 3.0, (len(lengths), max(lengths), 3 * H)).astype("float32")  # large: clipping matters
    gru = PaddleGRU(H, reverse=reverse)
    gru.load_paddle(weight, bias)
    output = gru(torch.from_numpy(gate_inputs), torch.tensor(lengths)).numpy()
    for row, length in enumerate(lengths):
        expected = reference_gru(gate_inputs[row, :length].astype("float64"), weight, bias, reverse)
        numpy.testing.assert_allclose(output[row, :length], expected, atol=2e-6)
    # The column blocks of [H, 3H] are not paddle's layout: reading them so gives other states.
    assert not numpy.allclose(
        output[0, :5],
        reference_gru(gate_inputs[0, :5], weight.reshape(3, H, H).transpose(1, 0, 2).reshape(H, 3 * H), bias, reverse),
        atol=1e-3,
    )


def test_bigru_layer_is_paddles_two_directions_in_a_padded_batch():
    """BiGRULayer runs both directions in one loop, the backward one over the padded time axis from its end with
    its state held at zero on the padding: on every real position it equals PaddleGRU's forward and reversed
    runs (each sequence reversed within its own length) within float32 rounding (a batched product of both
    directions need not round as PaddleGRU's one-direction product does: 6e-8 apart on an AMD EPYC of family 26),
    and exactly whatever the padding holds."""
    torch.manual_seed(0)
    H, lengths = 4, torch.tensor([6, 2, 5, 1])
    layer = BiGRULayer(3, H)
    for parameter in layer.parameters():
        parameter.data.normal_(0, 0.8)
    inputs = torch.randn(len(lengths), int(lengths.max()), 3) * 3.0
    output = layer(inputs, lengths)
    forward = layer.forward_gru(layer.forward_fc(inputs), lengths)
    backward = layer.backward_gru(layer.backward_fc(inputs), lengths)
    assert output.shape == (len(lengths), int(lengths.max()), 2 * H)
    for row, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(output[row, :length, :H], forward[row, :length], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(output[row, :length, H:], backward[row, :length], rtol=1e-6, atol=1e-6)
    # Other padding changes nothing on the real positions.
    noisy = inputs.clone()
    for row, length in enumerate(lengths.tolist()):
        noisy[row, length:] = 100.0
    again = layer(noisy, lengths)
    for row, length in enumerate(lengths.tolist()):
        assert torch.equal(again[row, :length], output[row, :length])


def test_flip_within_reverses_each_sequence_inside_its_length():
    values = torch.arange(8, dtype=torch.float32).reshape(2, 4, 1)
    flipped = flip_within(values, torch.tensor([3, 1]))
    assert flipped[..., 0].tolist() == [[2, 1, 0, 3], [4, 5, 6, 7]]
    assert torch.equal(flip_within(flipped, torch.tensor([3, 1])), values)


def path_score(emissions, crf_weights, path):
    score = crf_weights[0, path[0]] + crf_weights[1, path[-1]] + sum(emissions[i, tag] for i, tag in enumerate(path))
    return score + sum(crf_weights[2 + a, b] for a, b in zip(path, path[1:]))


def test_viterbi_is_the_best_path_by_brute_force_with_paddles_start_end_rows():
    rng = numpy.random.default_rng(1)
    tags, lengths = 3, [4, 1, 3]
    emissions = rng.normal(size=(len(lengths), max(lengths), tags)).astype("float32")
    crf_weights = rng.normal(size=(tags + 2, tags)).astype("float32")
    paths = viterbi_decode(torch.from_numpy(emissions), torch.from_numpy(crf_weights), torch.tensor(lengths))
    for row, length in enumerate(lengths):
        best = max(
            itertools.product(range(tags), repeat=length),
            key=lambda path: path_score(emissions[row].astype("float64"), crf_weights.astype("float64"), path),
        )
        assert paths[row] == list(best)


def test_network_batch_equals_one_by_one_and_empty_sequences_give_nothing():
    network = LacNetwork.from_paddle(fake_network_tensors("lac_model", seed=2))
    sequences = [[1, 2, 3, 4, 5], [6], [], [7, 8, 9]]
    batch = network.decode(sequences)
    assert batch == [network.decode([ids])[0] for ids in sequences]
    assert batch[2] == [] and [len(path) for path in batch] == [5, 1, 0, 3]


def brute_force_cut(text, words, total_count):
    """The best split of text into dictionary words and single characters by LAC's score (log(len(word)) -
    log(total) a word, -log(total) another character), ties to the longer first word, then the next ..."""
    best = None
    for cuts in itertools.product([False, True], repeat=max(len(text) - 1, 0)):
        ends = [i + 1 for i, cut in enumerate(cuts) if cut] + [len(text)]
        pieces = [text[a:b] for a, b in zip([0] + ends[:-1], ends)]
        if any(len(piece) > 1 and piece not in words for piece in pieces):
            continue
        score = round(sum(math.log(len(p) if p in words else 1) - math.log(total_count) for p in pieces), 9)
        if best is None or (score, ends) > best[:2]:
            best = (score, ends, pieces)
    return best[2] if text else []


@pytest.mark.parametrize("text", ["北京大学生活动", "北京大学", "研究生命起源", "大学生活", "中文"])
def test_dictionary_segmenter_is_the_best_cut_by_brute_force(text):
    words = ["北京", "北京大学", "大学", "大学生", "学生", "生活", "活动", "研究", "研究生", "生命", "起源", "命"]
    assert DictionarySegmenter(words, total_count=100)(text) == brute_force_cut(text, set(words), 100)


def test_dictionary_segmenter_cases_and_ascii_glue():
    """By hand: 北京|大学生|活动 (log 2 + log 3 + log 2 - 3 log 100) beats 北京大学|生|活动 (log 4 + log 2 - 3 ...);
    single ASCII letters and digits are glued back together (segment.py)."""
    segmenter = DictionarySegmenter(["北京", "北京大学", "大学", "大学生", "学生", "活动"], total_count=100)
    assert segmenter("北京大学生活动") == ["北京", "大学生", "活动"]
    assert segmenter("北京大学") == ["北京大学"]
    assert segmenter("ab12中文x") == ["ab12", "中", "文", "x"]
    assert segmenter("") == []


class FixedPaths:
    """A stand-in network: decode gives fixed paths (and records its input)."""

    def __init__(self, paths):
        self.paths = paths
        self.seen = None

    def decode(self, sequences):
        self.seen = [list(ids) for ids in sequences]
        return [self.paths.get(len(ids), []) for ids in sequences]


def test_tagger_ids_and_reading_tags_as_lac_does():
    vocabulary = [" ", "张", "三", "去", "北", "京", "1", "张三", "北京", "OOV"]
    lexicon = Lexicon(vocabulary, {"京": "京", "１": "1"}, LAC_TAGS)
    segmenter = DictionarySegmenter(["张三", "北京市"], total_count=10)
    tag = {name: LAC_TAGS.index(name) for name in ("PER-B", "v-B", "LOC-B", "m-B", "O")}
    # 张三|去|北|京|市|１ -> ids 张三, 去, then 北京市 is not in word.dic: its characters, 市 OOV; １ -> 1.
    network = FixedPaths(
        {7: [tag["PER-B"], tag["v-B"], tag["LOC-B"], tag["LOC-B"] + 1, tag["LOC-B"] + 1, tag["O"], tag["m-B"]]}
    )
    tagger = LacTagger(network, lexicon, segmenter)
    words, tags = tagger(["张三去北京市１x"])[0]
    assert network.seen == [[7, 3, 4, 5, 9, 6, 9]]  # 张三 one id; 北 京 市(OOV); １ as 1; x OOV
    # O continues a word; its last tag wins
    assert words == ["张三", "去", "北京市１", "x"] and tags == ["PER", "v", "", "m"]
    assert tagger([""]) == [([], [])]


def test_segmenter_reads_b_i_e_s():
    lexicon = Lexicon(["北", "京", "OOV"], {}, SEG_TAGS)
    network = FixedPaths({4: [0, 2, 3, 3], 0: []})  # -B -E -S -S
    assert LacSegmenter(network, lexicon)(["北京欢迎", ""]) == [["北京", "欢", "迎"], []]
    assert network.seen == [[0, 1, 2, 2], []]
