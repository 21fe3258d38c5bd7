"""Tiny Hugging Face models that tests build locally: no hub, no downloads."""
import warnings
from pathlib import Path
from typing import Sequence

import numpy
import pytest
import srsly
from spacy.language import Language
from spacy.tokens import Span

# Every character the tests' texts use, plus Latin/digit wordpieces; deduplicated, in order.
CHARACTERS = "我在北京市工作张三去了上海李四是阿里巴巴的员工王五住广州腾讯总部深圳，。！？；中国人民银行"
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDPIECES = ["a", "##b", "ab", "1", "##2"]
SIZES = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    # No dropout: predictions and training steps are comparable.
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}


def write_tiny_model(path: Path, kind: str) -> Path:
    """Write a randomly initialised 2-layer BERT, NEZHA or RoBERTa and its tokenizer to path.

    BERT and NEZHA get a WordPiece vocabulary of single characters; RoBERTa a
    byte-level BPE without merges, so every Chinese character is 3 wordpieces.
    """
    import torch
    from transformers import (
        BertConfig,
        BertModel,
        BertTokenizerFast,
        NezhaConfig,
        NezhaModel,
        RobertaConfig,
        RobertaModel,
        RobertaTokenizerFast,
    )
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    path.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    if kind == "roberta":
        symbols = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"] + list(bytes_to_unicode().values())
        srsly.write_json(path / "vocab.json", {symbol: i for i, symbol in enumerate(symbols)})
        (path / "merges.txt").write_text("#version: 0.2\n", encoding="utf8")
        tokenizer = RobertaTokenizerFast(vocab_file=str(path / "vocab.json"), merges_file=str(path / "merges.txt"))
        # RoBERTa's positions start after the padding index: 2 more than the window.
        sizes = {**SIZES, "max_position_embeddings": SIZES["max_position_embeddings"] + 2}
        model = RobertaModel(RobertaConfig(vocab_size=len(symbols), pad_token_id=1, **sizes))
    else:
        vocab = SPECIAL + list(dict.fromkeys(CHARACTERS)) + WORDPIECES
        (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf8")
        tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"))
        if kind == "bert":
            model = BertModel(BertConfig(vocab_size=len(vocab), **SIZES))
        else:
            model = NezhaModel(NezhaConfig(vocab_size=len(vocab), max_relative_position=16, **SIZES))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save_pretrained(str(path))
        tokenizer.save_pretrained(str(path))
    return path


REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_NAMES = sorted(p.stem for p in (REPO_ROOT / "configs").glob("*.cfg"))
# Small widths keep the CPU configs quick; the transformer configs take the tiny models.
SMALL_CONFIG_OVERRIDES = {
    "default": {"components.crf_ner.model.tok2vec.width": 16, "components.crf_ner.model.encoder.width": 16},
    "char_bigram": {"components.crf_ner.model.tok2vec.width": 16, "components.crf_ner.model.encoder.width": 16},
    "lexicon": {
        "components.crf_ner.model.tok2vec.width": 16,
        "components.crf_ner.model.tok2vec.lexicon_adapter.word_rows": 64,
        "components.crf_ner.model.encoder.width": 16,
    },
    "tener": {
        "components.crf_ner.model.encoder.n_heads": 2,
        "components.crf_ner.model.encoder.head_width": 8,
        "components.crf_ner.model.encoder.ffn_width": 16,
        "components.crf_ner.model.tok2vec.width": 16,
    },
}
SMALL_CONFIG_OVERRIDES["default_vectors"] = SMALL_CONFIG_OVERRIDES["default"]
CONFIG_TRAIN_DATA = [("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]), ("我在北京市工作", [(2, 5, "LOC")])]


def write_toy_vectors(path: Path, texts: Sequence[str], width: int = 4) -> Path:
    """A vectors pipeline (as `train-vectors` writes one) with a seeded random vector for each character
    and bigram of texts, for configs with static_vectors = true; no gensim needed."""
    from spacy_cner.training.vectors import vectors_pipeline

    keys = sorted({c for t in texts for c in t} | {a + b for t in texts for a, b in zip(t, t[1:])})
    vectors = numpy.random.default_rng(0).normal(size=(len(keys), width)).astype("float32")
    vectors_pipeline(keys, vectors).to_disk(path)
    return path


@pytest.fixture(scope="session")
def toy_vectors(tmp_path_factory) -> Path:
    return write_toy_vectors(tmp_path_factory.mktemp("vectors") / "vectors", [t for t, _ in CONFIG_TRAIN_DATA])


def small_config_pipeline(name: str, request) -> Language:
    """configs/<name>.cfg made small (a tiny local BERT or NEZHA for the transformer configs), initialized."""
    from spacy.training import Example
    from spacy.util import load_config, load_model_from_config
    from thinc.api import fix_random_seed

    path = REPO_ROOT / "configs" / f"{name}.cfg"
    overrides = dict(SMALL_CONFIG_OVERRIDES.get(name, {}))
    if "TransformerTok2Vec" in path.read_text(encoding="utf8"):
        kind = "nezha" if name.startswith("nezha") else "bert"
        overrides["vars.transformer"] = str(request.getfixturevalue(f"tiny_{kind}"))
    if "static_vectors = true" in path.read_text(encoding="utf8"):
        overrides["paths.vectors"] = str(request.getfixturevalue("toy_vectors"))
    config = load_config(path, overrides=overrides, interpolate=True)
    fix_random_seed(0)
    nlp = load_model_from_config(config, auto_fill=True)
    nlp.initialize(lambda: [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in CONFIG_TRAIN_DATA])
    return nlp


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("models") / "tiny-bert", "bert")


@pytest.fixture(scope="session")
def tiny_nezha(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("models") / "tiny-nezha", "nezha")


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("models") / "tiny-roberta", "roberta")


# Texts for test_context_sensitive_ner: adjacent pairs are (0, 1) and (1, 2).
CONTEXT_TEXTS = ["深圳特区成立", "张三来了", "深圳特区"]
CONTEXT_GOLD = [[(0, 4, "ORG")], [(0, 2, "PER")], [(0, 4, "GPE")]]


@Language.component("test_context_sensitive_ner")
def context_sensitive_ner(doc):
    """深圳特区 is GPE at the start of a text and ORG after other text, as in the paper's example."""
    spans = []
    for name, label in (("深圳特区", None), ("张三", "PER")):
        start = doc.text.find(name)
        while start >= 0:
            span = doc.char_span(start, start + len(name), label=label or ("GPE" if start == 0 else "ORG"))
            spans.append(span)
            start = doc.text.find(name, start + 1)
    doc.ents = [span for span in spans if isinstance(span, Span)]
    return doc
