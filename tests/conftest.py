"""What the tests share: the toy corpus, a `spacy train` helper, configs made small, and tiny
Hugging Face models built locally (no hub, no downloads)."""

import atexit
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy
import pytest
import spacy
import srsly
from spacy.language import Language
from spacy.tokens import DocBin, Span
from spacy.training import Example

import fake_lac
from spacy_cner.pretrained import fetch
from spacy_cner.pretrained.lac import LAC_SDIST

# No test downloads LAC's 65 MB sdist (configs/default.cfg fetches it at initialize), nor reads the copy this
# machine may have cached (a test passing through it here would fail on a fresh machine): the tests see an
# empty cache and may not download (pretrained/fetch.py), in this process and in the `spacy train` / `spacy
# project run` they start. They give the configs toy vectors or a fabricated sdist instead; the slow tests read
# the real sdist from the user's cache (REAL_LAC_SDIST), and skip, saying so, when it is not there.
REAL_LAC_SDIST = fetch.cache_dir() / LAC_SDIST.filename
_EMPTY_CACHE = tempfile.mkdtemp(prefix="spacy-cner-tests-cache-")
atexit.register(shutil.rmtree, _EMPTY_CACHE, True)
os.environ[fetch.CACHE_ENV] = _EMPTY_CACHE
os.environ[fetch.OFFLINE_ENV] = "1"

REPO_ROOT = Path(__file__).resolve().parents[1]
# The real corpora, where the checkout has a copy beside it (the slow tests and a few checks read them).
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
# The toy corpus. Character offsets, end exclusive (a blank "zh" pipeline gives one token per
# character). Tests that want fewer sentences take the first few.
TRAIN_DATA = [
    ("我在北京市工作", [(2, 5, "LOC")]),
    ("张三去了上海", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("李四是阿里巴巴的员工", [(0, 2, "PER"), (3, 7, "ORG")]),
    ("王五住在广州", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("腾讯总部在深圳", [(0, 2, "ORG"), (5, 7, "LOC")]),
]
Annotated = Sequence[Tuple[str, List[Tuple[int, int, str]]]]


def make_examples(nlp: Language, data: Annotated = TRAIN_DATA) -> List[Example]:
    """Examples of (text, entities) pairs, tokenized by nlp."""
    return [Example.from_dict(nlp.make_doc(text), {"entities": ents}) for text, ents in data]


def write_docs(path: Path, data: Annotated = TRAIN_DATA) -> Path:
    """The gold docs of (text, entities) pairs as a .spacy file at path."""
    DocBin(docs=[example.reference for example in make_examples(spacy.blank("zh"), data)]).to_disk(path)
    return path


def write_corpus(folder: Path, train: Annotated = TRAIN_DATA * 2, dev: Annotated = TRAIN_DATA[:3]) -> Dict[str, str]:
    """train.spacy and dev.spacy in folder, for `spacy train`.

    RETURNS (Dict[str, str]): the `paths.train` and `paths.dev` overrides that name them.
    """
    splits = {"train": train, "dev": dev}
    return {f"paths.{name}": str(write_docs(folder / f"{name}.spacy", data)) for name, data in splits.items()}


# Words of the toy corpus for the lexicon configs, nested ones (北京, 北京市) among them.
LEXICON_WORDS = ["北京", "北京市", "上海", "张三", "李四", "阿里巴巴", "巴巴", "工作", "员工", "广州", "深圳"]


def write_lexicon(path: Path, vectors: bool) -> Path:
    """LEXICON_WORDS and 的 as a word list with frequencies, or as word2vec text vectors (seeded)."""
    if vectors:
        rng = numpy.random.default_rng(0)
        lines = [f"{len(LEXICON_WORDS) + 1} 4", "的 0.1 0.2 0.3 0.4"]
        lines += [w + " " + " ".join(f"{v:.3f}" for v in rng.normal(size=4)) for w in LEXICON_WORDS]
    else:
        lines = [f"{w} {100 + i} n" for i, w in enumerate(LEXICON_WORDS)] + ["的 5000 u"]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


def train_from_config(config: Union[str, Path], output: Path, overrides: Dict[str, Any]) -> Path:
    """`spacy train` in this process, through spaCy's own spacy.cli.train.train.

    config (Union[str, Path]): a config's name in configs/ ("tener") or a config file.
    output (Path): the output folder; model-best and model-last are saved in it.
    overrides (Dict[str, Any]): dotted config overrides, as `spacy train --a.b value` takes them.
    RETURNS (Path): output.
    """
    from spacy.cli.train import train

    path = REPO_ROOT / "configs" / f"{config}.cfg" if isinstance(config, str) else config
    train(path, output, overrides=overrides)
    return output


def trained_pipeline(path):
    """A tiny crf_ner pipeline overfit to one sentence, saved at path; its example."""
    nlp = spacy.blank("zh")
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": {
            "@architectures": "spacy-cner.CharBigramEmbed.v1",
            "width": 16,
            "char_rows": 100,
            "bigram_rows": 100,
            "bigram_dropout": 0.0,
        },
        "encoder": None,
    }
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = [Example.from_dict(nlp.make_doc("我在北京"), {"entities": [(2, 4, "LOC")]})]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(40):
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(path)
    return examples


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


CONFIG_NAMES = sorted(p.stem for p in (REPO_ROOT / "configs").glob("*.cfg"))
# Small widths keep the CPU configs quick; the transformer configs take the tiny models.
SMALL_CONFIG_OVERRIDES = {
    "pretrain_free": {"components.crf_ner.model.tok2vec.width": 16, "components.crf_ner.model.encoder.width": 16},
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
SMALL_CONFIG_OVERRIDES["fast"] = SMALL_CONFIG_OVERRIDES["pretrain_free"]
# configs/default.cfg is pretrain_free.cfg with LAC's vectors fetched at initialize: here vectors trained on the
# toy corpus instead, as pretrain_free's (no 65 MB download in the tests; tests/pretrained/test_lac.py trains it
# on a fabricated LAC sdist). A `spacy train` in a subprocess takes no section override: it passes
# --paths.vectors (toy_vectors), which spacy-cner.lac_vectors.v1 reads instead of LAC's.
SMALL_CONFIG_OVERRIDES["default"] = {
    **SMALL_CONFIG_OVERRIDES["pretrain_free"],
    "initialize.before_init": {
        "@callbacks": "spacy-cner.self_trained_vectors.v1",
        "corpus": "${paths.train}",
        "pretrained": "${paths.vectors}",
        "width": 50,
        "window": 5,
        "epochs": 10,
        "min_count": 2,
        "seed": "${system.seed}",
    },
}
# configs/lac_context.cfg is default.cfg with LAC's tagger as a frozen encoder: small_config_pipeline gives it the
# toy vectors (paths.vectors) and the tagger a fabricated sdist (fake_lac_tarball, tests/fake_lac.py).
SMALL_CONFIG_OVERRIDES["lac_context"] = dict(SMALL_CONFIG_OVERRIDES["pretrain_free"])
# The fine-tuned LAC configs (docs/lac_encoder.md): a narrow BiLSTM; lac_context_finetune also lac_context's widths.
SMALL_CONFIG_OVERRIDES["lac_context_finetune"] = dict(SMALL_CONFIG_OVERRIDES["pretrain_free"])
for _name in ("lac_finetune", "lac_finetune_df", "lac_finetune_df_at", "lac_lebert"):
    SMALL_CONFIG_OVERRIDES[_name] = {"components.crf_ner.model.encoder.width": 16}
# configs/tener.cfg shrunk less, wide enough to learn the toy corpus in a few dozen steps.
SMALL_TENER = {
    "components.crf_ner.model.tok2vec.width": 32,
    "components.crf_ner.model.tok2vec.embed_width": 16,
    "components.crf_ner.model.tok2vec.char_rows": 500,
    "components.crf_ner.model.tok2vec.bigram_rows": 1000,
    "components.crf_ner.model.encoder.n_heads": 2,
    "components.crf_ner.model.encoder.head_width": 8,
    "components.crf_ner.model.encoder.ffn_width": 32,
}
# Every dropout of configs/tener.cfg off: training steps that tests can compare.
TENER_NO_DROPOUT = {
    f"components.crf_ner.model.{name}": 0.0
    for name in (
        "tok2vec.dropout",
        "tok2vec.bigram_dropout",
        "encoder.dropout",
        "encoder.attention_dropout",
        "encoder.output_dropout",
    )
}


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
    return write_toy_vectors(tmp_path_factory.mktemp("vectors") / "vectors", [t for t, _ in TRAIN_DATA[:2]])


def small_config_pipeline(name: str, request, extra: Optional[Dict[str, object]] = None) -> Language:
    """configs/<name>.cfg made small (a tiny local BERT or NEZHA for the transformer configs), initialized;
    extra: more config overrides."""
    from spacy.util import load_config, load_model_from_config
    from thinc.api import fix_random_seed

    path = REPO_ROOT / "configs" / f"{name}.cfg"
    overrides = {**SMALL_CONFIG_OVERRIDES.get(name, {}), **(extra or {})}
    if "TransformerTok2Vec" in path.read_text(encoding="utf8"):
        kind = "nezha" if name.startswith("nezha") else "bert"
        overrides["vars.transformer"] = str(request.getfixturevalue(f"tiny_{kind}"))
    if "static_vectors = true" in path.read_text(encoding="utf8"):
        overrides["paths.vectors"] = str(request.getfixturevalue("toy_vectors"))
    lac = None
    if "spacy-cner.LacFeatures" in path.read_text(encoding="utf8"):
        lac = request.getfixturevalue("fake_lac_tarball")
        overrides["paths.lac_sdist"] = str(lac)
    config = load_config(path, overrides=overrides, interpolate=True)
    fix_random_seed(0)
    nlp = load_model_from_config(config, auto_fill=True)
    with fake_lac.accepted(lac):
        nlp.initialize(lambda: make_examples(nlp, TRAIN_DATA[:2]))
    return nlp


@pytest.fixture(scope="session")
def fake_lac_tarball(tmp_path_factory) -> Path:
    """A fabricated LAC sdist with a tiny tagger (tests/fake_lac.py); open_lac accepts it only inside
    fake_lac.accepted, or in a test that takes fake_lac_sdist."""
    return fake_lac.write_fake_lac(tmp_path_factory.mktemp("lac") / "LAC-2.1.2.tar.gz")


@pytest.fixture
def fake_lac_sdist(fake_lac_tarball, monkeypatch) -> Path:
    """fake_lac_tarball, accepted by open_lac for the test's duration."""
    for target, name, value in fake_lac.patches(fake_lac_tarball):
        monkeypatch.setattr(target, name, value)
    return fake_lac_tarball


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
