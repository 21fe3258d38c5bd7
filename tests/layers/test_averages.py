"""The optimizer's parameter averages (use_averages) reach the torch-backed layers.

spaCy evaluates and saves with nlp.use_params(optimizer.averages); thinc's PyTorchShim
looked the averages up under keys the optimizer never writes, so they were ignored.
"""

import numpy
import pytest
import spacy
from thinc.api import Adam, fix_random_seed

from conftest import TRAIN_DATA, make_examples

TOK2VEC = {
    "@architectures": "spacy-cner.CharBigramEmbed.v1",
    "width": 16,
    "embed_width": 8,
    "char_rows": 100,
    "bigram_rows": 100,
}
ENCODERS = {
    "bilstm": {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 16},
    "tener": {"@layers": "spacy-cner.TENEREncoder.v1", "n_heads": 2, "head_width": 8, "ffn_width": 16},
}


def torch_weights(nlp) -> dict:
    """Every torch parameter of the pipe's model, copied, by (shim id, name)."""
    model = nlp.get_pipe("crf_ner").model
    return {
        (shim.id, name): param.detach().numpy().copy()
        for layer in model.walk()
        for shim in layer.shims
        for name, param in shim._model.named_parameters()
    }


def trained(tok2vec: dict, encoder) -> tuple:
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": tok2vec, "encoder": encoder}
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = make_examples(nlp, TRAIN_DATA[:2])
    optimizer = Adam(0.01, use_averages=True)
    nlp.initialize(lambda: examples, sgd=optimizer)
    for _ in range(5):
        nlp.update(examples, sgd=optimizer)
    return nlp, optimizer


def check_averages_used(nlp, optimizer) -> None:
    current = torch_weights(nlp)
    # Parameters that never get a gradient (BERT's pooler) have no average and stay as they are.
    averaged = [key for key in current if key in optimizer.averages]
    assert len(averaged) > len(current) / 2
    with nlp.use_params(optimizer.averages):
        inside = torch_weights(nlp)
    for key in current:
        expected = optimizer.averages[key] if key in optimizer.averages else current[key]
        assert numpy.allclose(inside[key], expected), key
    assert any(not numpy.allclose(current[key], optimizer.averages[key]) for key in averaged)
    # The trained weights come back afterwards.
    after = torch_weights(nlp)
    assert all(numpy.array_equal(after[key], current[key]) for key in current)


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_torch_layers_use_the_averages(encoder):
    check_averages_used(*trained(TOK2VEC, ENCODERS[encoder]))


def test_a_transformer_uses_the_averages(tiny_bert):
    check_averages_used(*trained({"@architectures": "spacy-cner.TransformerTok2Vec.v1", "name": str(tiny_bert)}, None))
