"""A ready Chinese pipeline from Baidu's LAC (Apache-2.0), no training: a spaCy tokenizer that runs LAC's tagger.

As spacy-stanza and spacy-udpipe do for their analysers, the tokenizer runs the whole analyser once per text
and writes all it gives: tokens (LAC's words, or characters), `token.tag_` (LAC's POS: its 24 classes, the
entity words with the POS whose ids they share: PER nr, LOC ns, ORG nt, TIME t) and `doc.ents` (each word LAC
tags PER, LOC, ORG or TIME). Its weights and dictionaries are saved in the pipeline's tokenizer folder, so
`spacy.load` needs neither the sdist nor paddle.
"""
import io
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import numpy
import spacy
import srsly
import torch
from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import DummyTokenizer, ensure_path, registry
from spacy.vocab import Vocab

from ..tokenizer import _check_encodable, words_and_spaces
from .lac import LAC_CREDIT, LacFiles
from .lac_analyzer import ENTITY_POS, DictionarySegmenter, LacTagger, Lexicon, tagger_from_sdist
from .lac_net import LacNetwork

LAC_TOKENIZER = "spacy-cner.LacTokenizer.v1"
TOKENS = ("words", "chars")
PIPELINE_CREDIT = {**LAC_CREDIT, "files": "LAC/lac_model/model/* (the tagger's weights), LAC/lac_model/conf/*"}
DESCRIPTION = (
    "Chinese words, POS tags and PER/LOC/ORG/TIME entities from Baidu's LAC 2.1.2 (Lexical Analysis of "
    "Chinese, Apache-2.0, https://github.com/baidu/lac): its BiGRU-CRF tagger and dictionary segmenter "
    "rebuilt in torch from the weights of its PyPI sdist, untrained here."
)
FILES = ("cfg", "lexicon", "segment_dictionary", "weights")


@registry.tokenizers(LAC_TOKENIZER)
def create_lac_tokenizer(tokens: str = "words") -> Callable[[Language], "LacTokenizer"]:
    """A tokenizer running LAC's tagger (weights from the pipeline's tokenizer folder, or build_pipeline).

    tokens (str): "words" (LAC's words) or "chars" (one token per character, tags and entities the same).
    """
    if tokens not in TOKENS:
        raise ValueError(f"LacTokenizer: tokens must be one of {TOKENS}, got {tokens!r}.")

    def lac_tokenizer_factory(nlp: Language) -> "LacTokenizer":
        return LacTokenizer(nlp.vocab, tokens=tokens)

    return lac_tokenizer_factory


class LacTokenizer(DummyTokenizer):
    """Tokens, tags and entities from LAC's tagger (lac_analyzer.LacTagger).

    vocab (Vocab): The pipeline's vocab.
    tokens (str): "words" or "chars".
    tagger (Optional[LacTagger]): The analyser; None until from_disk / from_bytes (or set by build_pipeline).
    """

    def __init__(self, vocab: Vocab, tokens: str = "words", tagger: Optional[LacTagger] = None):
        self.vocab = vocab
        self.tokens = tokens
        self.tagger = tagger

    def __call__(self, text: str) -> Doc:
        return next(self.pipe([text]))

    def pipe(self, texts: Iterable[str], batch_size: int = 32) -> Iterator[Doc]:
        """The docs of texts, LAC run over batch_size texts at a time."""
        if self.tagger is None:
            raise ValueError("LacTokenizer has no weights: load a pipeline written by `python -m spacy_cner "
                             "pretrained pipeline`, or build one with spacy_cner.pretrained.lac_pipeline.build_pipeline.")
        batch: List[str] = []
        for text in texts:
            _check_encodable(text)
            batch.append(text)
            if len(batch) >= batch_size:
                yield from self._docs(batch)
                batch = []
        if batch:
            yield from self._docs(batch)

    def _docs(self, texts: Sequence[str]) -> Iterator[Doc]:
        assert self.tagger is not None
        for text, (words, tags) in zip(texts, self.tagger(texts)):
            yield self.make_doc(text, words, tags)

    def make_doc(self, text: str, words: Sequence[str], tags: Sequence[str]) -> Doc:
        """The doc of LAC's (words, tags) over text: a word's surrounding whitespace becomes spaCy's (a
        trailing space, or its own token), each token takes the tag of the word holding its first character."""
        ends = numpy.cumsum([len(word) for word in words], dtype="int64")
        pieces = list(text) if self.tokens == "chars" else [word.strip() or word for word in words]
        token_words, spaces = words_and_spaces(pieces, text)
        doc = Doc(self.vocab, words=token_words, spaces=spaces)
        pos_tags = [ENTITY_POS.get(tag, tag) for tag in tags]
        for token in doc:
            token.tag_ = pos_tags[int(numpy.searchsorted(ends, token.idx, side="right"))]
        entities = []
        start = 0
        for word, tag, end in zip(words, tags, ends.tolist()):
            if tag in ENTITY_POS and word.strip():
                left = start + len(word) - len(word.lstrip())
                right = end - (len(word) - len(word.rstrip()))
                span = doc.char_span(left, right, label=tag, alignment_mode="expand")
                if span is not None:
                    entities.append(span)
            start = end
        doc.ents = entities
        return doc

    # --- serialization: the tagger's weights and dictionaries --------------------------------------------------

    def _serialize(self) -> Dict[str, bytes]:
        if self.tagger is None:
            raise ValueError("LacTokenizer has no weights to save.")
        network = self.tagger.network
        lexicon = self.tagger.lexicon
        cfg = {"tokens": self.tokens, "vocab_size": network.embedding.num_embeddings,
               "input_width": network.embedding.embedding_dim, "hidden_width": network.layers[0].forward_gru.hidden_width,
               "tag_count": network.emission.out_features}
        buffer = io.BytesIO()
        numpy.savez(buffer, **{name: value.numpy() for name, value in network.state_dict().items()})
        return {
            "cfg": srsly.json_dumps(cfg).encode("utf8"),
            "lexicon": srsly.json_dumps({"vocabulary": lexicon.vocabulary, "replacements": lexicon.replacements,
                                         "tags": lexicon.tags}).encode("utf8"),
            "segment_dictionary": srsly.json_dumps({"words": self.tagger.segmenter.words,
                                                    "total_count": self.tagger.segmenter.total_count}).encode("utf8"),
            "weights": buffer.getvalue(),
        }

    def _deserialize(self, data: Dict[str, bytes]) -> "LacTokenizer":
        cfg = srsly.json_loads(data["cfg"])
        lexicon = srsly.json_loads(data["lexicon"])
        segment = srsly.json_loads(data["segment_dictionary"])
        network = LacNetwork(cfg["vocab_size"], cfg["input_width"], cfg["hidden_width"], cfg["tag_count"])
        with numpy.load(io.BytesIO(data["weights"]), allow_pickle=False) as arrays:
            network.load_state_dict({name: torch.from_numpy(arrays[name]) for name in arrays.files})
        self.tokens = cfg["tokens"]
        self.tagger = LacTagger(network, Lexicon(lexicon["vocabulary"], lexicon["replacements"], lexicon["tags"]),
                                DictionarySegmenter(segment["words"], segment["total_count"]))
        return self

    def to_bytes(self, **kwargs) -> bytes:
        return srsly.msgpack_dumps(self._serialize())

    def from_bytes(self, data: bytes, **kwargs) -> "LacTokenizer":
        return self._deserialize(srsly.msgpack_loads(data))

    def to_disk(self, path: Union[str, Path], **kwargs) -> None:
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        for name, data in self._serialize().items():
            (path / _file_name(name)).write_bytes(data)

    def from_disk(self, path: Union[str, Path], **kwargs) -> "LacTokenizer":
        path = ensure_path(path)
        missing = [_file_name(name) for name in FILES if not (path / _file_name(name)).exists()]
        if missing:
            raise ValueError(f"{path}: {', '.join(missing)} missing: not a LacTokenizer folder (the pipeline's "
                             "tokenizer/ written by `python -m spacy_cner pretrained pipeline`).")
        return self._deserialize({name: (path / _file_name(name)).read_bytes() for name in FILES})


def build_pipeline(lac: LacFiles, tokens: str = "words") -> Language:
    """A blank Chinese pipeline whose tokenizer runs LAC's tagger read from the checked sdist.

    lac (LacFiles): The sdist's files (lac.open_lac).
    tokens (str): "words" or "chars".
    RETURNS (Language): The pipeline, LAC credited in its meta.
    """
    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": LAC_TOKENIZER, "tokens": tokens}}})
    nlp.tokenizer.tagger = tagger_from_sdist(lac)
    nlp.meta.update({"name": "lac", "version": "2.1.2", "description": DESCRIPTION, "license": "Apache-2.0",
                     "author": "Baidu NLP (LAC); converted by spacy_cner", "url": LAC_CREDIT["url"]})
    nlp.meta["sources"] = [source for source in nlp.meta.get("sources") or [] if source.get("name") != PIPELINE_CREDIT["name"]]
    nlp.meta["sources"].append(dict(PIPELINE_CREDIT))
    return nlp


def _file_name(name: str) -> str:
    return f"{name}.npz" if name == "weights" else f"{name}.json"
