"""spacy_cner: Chinese named-entity recognition for spaCy."""

from .about import __version__

from .architectures import build_crf_tagger
from .training.checkpoint_average import CheckpointAverage, adam_checkpoint_average
from .layers.bilstm import BiLSTMEncoder
from .layers.char_bigram_embed import CharBigramEmbed, CharBigramEmbed_v2, CharBigramEmbed_v3
from .layers.crf import CRF, crf_decode
from .layers.key_embed import KeyEmbed
from .layers.lac_features import LacFeatures
from .layers.scalar_mix import ScalarMix
from .layers.soft_lexicon import SoftLexicon
from .layers.tener import TENEREncoder
from .layers.transformer import TransformerTok2Vec
from .training.corpus_size import corpus_batch_size, corpus_max_epochs, corpus_patience, corpus_patience_v2
from .pipeline.crf_ner import CRFEntityRecognizer, make_crf_ner
from .robustness.metrics import make_robust_ner_scorer
from .training.shipped_configs import config_path
from .tokenizer import LinearChineseTokenizer
from . import displacy_colours  # noqa: F401  registers the labels' displaCy colours

__all__ = [
    "__version__",
    "BiLSTMEncoder",
    "CharBigramEmbed",
    "CharBigramEmbed_v2",
    "CharBigramEmbed_v3",
    "CheckpointAverage",
    "CRF",
    "CRFEntityRecognizer",
    "KeyEmbed",
    "LacFeatures",
    "LinearChineseTokenizer",
    "ScalarMix",
    "SoftLexicon",
    "TENEREncoder",
    "TransformerTok2Vec",
    "adam_checkpoint_average",
    "build_crf_tagger",
    "config_path",
    "corpus_batch_size",
    "corpus_max_epochs",
    "corpus_patience",
    "corpus_patience_v2",
    "crf_decode",
    "make_crf_ner",
    "make_robust_ner_scorer",
]
