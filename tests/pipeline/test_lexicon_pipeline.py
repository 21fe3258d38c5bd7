"""The lexicon adapter in pipelines: after the CPU embeddings and inside a transformer, trained,
saved with its lexicon, and with the scalar mix and FGM."""

import numpy
import pytest
import spacy
import torch
from spacy.util import load_config
from thinc.api import Adam, fix_random_seed

from spacy_cner.training.adversarial import EmbeddingAttack
from spacy_cner.layers._torch import torch_module
from spacy_cner.layers.lexicon_adapter import lexicon_hook
from spacy_cner.layers.transformer.batch import window_batch, window_geometry
from spacy_cner.layers.transformer.wordpieces import plan_doc
from spacy_cner.lexicon import Lexicon

from conftest import LEXICON_WORDS, REPO_ROOT, TRAIN_DATA, make_examples, write_lexicon

TEXTS = ["我在北京市工作", "", "张三去了上海。李四 ab", "腾讯总部在深圳"]
ADAPTER = {"@layers": "spacy-cner.LexiconAdapter.v1", "word_width": 8, "word_rows": 64, "dropout": 0.0}
CPU_TOK2VEC = {
    "@architectures": "spacy-cner.CharBigramEmbed.v1",
    "width": 16,
    "char_rows": 200,
    "bigram_rows": 300,
    "dropout": 0.0,
    "bigram_dropout": 0.0,
}


def transformer_tok2vec(path, **settings):
    return {"@architectures": "spacy-cner.TransformerTok2Vec.v1", "name": str(path), **settings}


def make_nlp(tok2vec, lexicon=None, **settings):
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": tok2vec, "encoder": None}
    nlp.add_pipe("crf_ner", config={"model": model, **settings})
    examples = make_examples(nlp, TRAIN_DATA[:4])
    nlp.get_pipe("crf_ner").initialize(lambda: examples, nlp=nlp, lexicon=lexicon or Lexicon(LEXICON_WORDS))
    return nlp, examples


def entities(nlp, texts=TEXTS):
    return [[(ent.start_char, ent.end_char, ent.label_) for ent in doc.ents] for doc in nlp.pipe(texts)]


def hidden_states(tok2vec_model, doc, hooked: bool):
    """All hidden states of the transformer for one doc, with or without the adapter's hook."""
    transformer = tok2vec_model.get_ref("transformer")
    hf = transformer.shims[0]._hfmodel
    max_length, offset = window_geometry(hf.transformer.config, hf.tokenizer, tok2vec_model.attrs["window_size"])
    adapter = tok2vec_model.get_ref("lexicon_adapter")
    plan = plan_doc(doc, hf.tokenizer, max_length, adapter)
    batch = window_batch(
        hf.tokenizer, [(plan, plan.windows[0])], offset, max_words_per_char=adapter.attrs["max_words_per_char"]
    )
    inputs = {key: torch.as_tensor(batch[key]) for key in ("input_ids", "attention_mask")}
    with torch.no_grad():
        if hooked:
            with lexicon_hook(
                adapter, hf.transformer, tok2vec_model.attrs["lexicon_layer"], batch["word_ids"], is_train=False
            ):
                return hf.transformer(**inputs, output_hidden_states=True).hidden_states, batch
        return hf.transformer(**inputs, output_hidden_states=True).hidden_states, batch


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_adapter_replaces_the_output_of_layer_k(tiny_bert, layer):
    from spacy_cner.layers.lexicon_adapter import fuse

    nlp, _ = make_nlp(transformer_tok2vec(tiny_bert, lexicon_adapter=ADAPTER, lexicon_layer=layer))
    tok2vec = nlp.get_pipe("crf_ner").model.get_ref("tok2vec")
    doc = nlp.make_doc("我在北京市工作")
    plain, batch = hidden_states(tok2vec, doc, hooked=False)
    hooked, _ = hidden_states(tok2vec, doc, hooked=True)
    # [CLS], the 7 characters, [SEP]: special tokens get no words, 北京市 gets its 2 words.
    ids = batch["word_ids"][0]
    assert (ids[0] == -1).all() and (ids[-1] == -1).all()
    assert sorted(LEXICON_WORDS[i] for i in ids[3] if i >= 0) == ["北京", "北京市"]
    for j in range(layer):
        torch.testing.assert_close(hooked[j], plain[j])
    expected = fuse(tok2vec.get_ref("lexicon_adapter"), plain[layer], batch["word_ids"])
    torch.testing.assert_close(hooked[layer], expected)
    assert not torch.allclose(hooked[-1], plain[-1])


def test_adapter_beyond_the_last_layer_fails(tiny_bert):
    with pytest.raises(ValueError, match="lexicon_layer is 3 but BertModel has 2 layers"):
        make_nlp(transformer_tok2vec(tiny_bert, lexicon_adapter=ADAPTER, lexicon_layer=3))


def test_wordpieces_get_the_words_of_their_characters(tiny_roberta):
    """RoBERTa's byte-level BPE: 3 wordpieces per character, each with the character's words."""
    nlp, _ = make_nlp(transformer_tok2vec(tiny_roberta, lexicon_adapter=ADAPTER))
    tok2vec = nlp.get_pipe("crf_ner").model.get_ref("tok2vec")
    tokenizer = tok2vec.get_ref("transformer").shims[0]._hfmodel.tokenizer
    doc = nlp.make_doc("上海工作")
    plan = plan_doc(doc, tokenizer, 60, tok2vec.get_ref("lexicon_adapter"))
    assert len(plan.input_ids) == 12
    words = [sorted(LEXICON_WORDS[i] for i in row if i >= 0) for row in plan.wordpiece_words]
    assert words == [["上海"]] * 6 + [["工作"]] * 6


@pytest.mark.parametrize("kind", ["cpu", "bert"])
def test_trains_with_scalar_mix_and_fgm(kind, tiny_bert):
    if kind == "cpu":
        tok2vec = {**CPU_TOK2VEC, "lexicon_adapter": ADAPTER}
    else:
        tok2vec = transformer_tok2vec(tiny_bert, scalar_mix=True, lexicon_adapter=ADAPTER)
    nlp, examples = make_nlp(tok2vec, adversarial={"@misc": "spacy-cner.fgm.v1", "epsilon": 1.0})
    ner = nlp.get_pipe("crf_ner")
    adapter = torch_module(ner.model.get_ref("tok2vec").get_ref("lexicon_adapter"))
    start = {name: param.detach().clone() for name, param in adapter.named_parameters()}
    # FGM perturbs the adapter's word table too, and puts it back bit for bit.
    ner.update(examples)
    table = adapter.table.weight.detach().clone()
    restore = EmbeddingAttack("fgm", 1.0).perturb(ner.model)
    assert not torch.equal(adapter.table.weight, table)
    restore()
    assert torch.equal(adapter.table.weight, table)
    optimizer = Adam(0.01)
    for _ in range(30):
        losses = nlp.update(examples, sgd=optimizer)
    assert losses["crf_ner_adversarial"] > 0
    for name, param in adapter.named_parameters():
        assert not torch.equal(param, start[name]), name
    assert entities(nlp, [t for t, _ in TRAIN_DATA[:4]]) == [e for _, e in TRAIN_DATA[:4]]


def test_long_doc_in_windows(tiny_bert):
    nlp, _ = make_nlp(transformer_tok2vec(tiny_bert, window_size=8, lexicon_adapter=ADAPTER))
    text = "我在北京市工作。" * 6
    doc = nlp(text)
    assert len(doc) == len(text)
    ner = nlp.get_pipe("crf_ner")
    whole = ner.model.predict([nlp.make_doc(text)])[0]
    alone = ner.model.predict([nlp.make_doc("我在北京市工作。")])[0]
    # Each window holds one sentence: its rows are those of the sentence alone.
    numpy.testing.assert_allclose(whole[8:16], alone, atol=1e-5)


def test_lexicon_without_an_adapter_fails():
    with pytest.raises(ValueError, match="has no layer that reads one"):
        make_nlp(CPU_TOK2VEC)


def test_initialize_without_a_lexicon_fails():
    nlp = spacy.blank("zh")
    model = {"@architectures": "spacy-cner.CRFTagger.v1", "tok2vec": {**CPU_TOK2VEC, "lexicon_adapter": ADAPTER}}
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = make_examples(nlp, TRAIN_DATA[:4])
    with pytest.raises(ValueError, match="The lexicon adapter has no lexicon"):
        nlp.initialize(lambda: examples)


def test_lexicon_config_loader(tmp_path):
    from spacy_cner.lexicon import make_lexicon

    words = make_lexicon(str(write_lexicon(tmp_path / "words.txt", False)), min_frequency=101)
    assert words.words == LEXICON_WORDS[1:] and words.vectors is None  # 100 < 101; 的 is one character
    vectors = make_lexicon(str(write_lexicon(tmp_path / "vectors.txt", True)), max_words=3)
    assert vectors.words == LEXICON_WORDS[:3] and vectors.vectors.shape == (3, 4)
    with pytest.raises(ValueError, match="Lexicon file not found: nowhere.txt"):
        make_lexicon("nowhere.txt")
    with pytest.raises(ValueError, match="no frequencies"):
        make_lexicon(str(tmp_path / "vectors.txt"), min_frequency=2)
    config = load_config(REPO_ROOT / "configs" / "lexicon.cfg")
    assert config["paths"]["lexicon"] == "jieba"


def test_pipe_n_process_with_the_adapter(tmp_path):
    nlp, examples = make_nlp({**CPU_TOK2VEC, "lexicon_adapter": ADAPTER})
    optimizer = Adam(0.01)
    for _ in range(20):
        nlp.update(examples, sgd=optimizer)
    texts = [t for t, _ in TRAIN_DATA[:4]] * 3 + TEXTS
    expected = entities(nlp, texts)
    multi = [
        [(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe(texts, n_process=2, batch_size=2)
    ]
    assert multi == expected


def test_pipe_bytes_carry_the_lexicon():
    nlp, examples = make_nlp({**CPU_TOK2VEC, "lexicon_adapter": ADAPTER})
    optimizer = Adam(0.01)
    for _ in range(10):
        nlp.update(examples, sgd=optimizer)
    data = nlp.get_pipe("crf_ner").to_bytes()
    fresh = spacy.blank("zh")
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": {**CPU_TOK2VEC, "lexicon_adapter": ADAPTER},
        "encoder": None,
    }
    pipe = fresh.add_pipe("crf_ner", config={"model": model})
    pipe.from_bytes(data)
    adapter = pipe.model.get_ref("tok2vec").get_ref("lexicon_adapter")
    assert adapter.attrs["lexicon"].lexicon.words == LEXICON_WORDS
    assert entities(fresh) == entities(nlp)
    without = spacy.blank("zh").add_pipe("crf_ner", config={"model": model})
    without.from_bytes(nlp.get_pipe("crf_ner").to_bytes(exclude=["lexicon"]))
    with pytest.raises(ValueError, match="has no lexicon"):
        without.model.predict([nlp.make_doc("北京")])
