"""LAC's tagger (Baidu's lexical analyser, pretrained/lac_net.py) as a frozen contextual encoder: per token, the
states of its top BiGRU layer and/or its emission scores (24 POS classes and 4 entity types, B/I, and O), with
the token's position in LAC's word.

LAC reads mixed word and character ids (lac_analyzer.LacTagger.ids: a dictionary word of its vocabulary is one
id, other text one id per character). The features of an id go to each character it covers, with the character's
position in that word (B/M/E/S one-hot); a token of several characters (a word-token doc) gets the mean over its
characters, as SoftLexicon's do, a whitespace token zeros. Each text is cut into windows of at most window_size
characters at sentence ends (long_docs.split_windows), by default each sentence alone (it then has the same
features alone and beside another, as sentence_bigrams gives it the same bigrams), and the windows of the whole
batch run together, sorted by length and padded in groups.

Nothing is trained, so in training the features of each window are computed once (TrainCache, keyed by the
window's text, up to train_cache_mb): from the second epoch on a training step skips LAC's network for the
sentences it has seen. Prediction always computes them.

The weights come from LAC's sdist at initialize (pretrained/lac.py's open_lac: fetched through pip's index and
cached, or a local copy) and are saved with the model: the network's state, and as its module's constructor
arguments the vocabulary, q2b.dic and the dictionary segmenter's words. A saved pipeline loads
without the sdist.
"""

import functools
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy
import torch
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, registry, torch2xp
from thinc.types import Floats2d

from ..lexicon import doc_text, token_means, token_means_backward, token_spans
from ..pretrained.lac import LacFiles, open_lac
from ..pretrained.lac_analyzer import DictionarySegmenter, LacTagger, Lexicon, length_groups, tagger_from_sdist
from ..pretrained.lac_analyzer import text_windows as lac_text_windows
from ..pretrained.lac_net import LacNetwork
from ._torch import InPlacePyTorchShim, RebuildableModule, deserialize_rebuildable, serialize_rebuildable
from ._torch import finish_update_in_place, set_torch_module, torch_module
from .key_embed import update_table_rows
from .lexicon_adapter import fuse, word_ids
from .soft_lexicon import LastBatch, principal_directions

# A character's position in LAC's word (the text one id covers), in feature order.
POSITIONS = ("B", "M", "E", "S")
B, M, E, S = range(len(POSITIONS))


@registry.layers("spacy-cner.LacFeatures.v1")
def LacFeatures(
    hidden: bool = True,
    emissions: bool = True,
    projected_width: Optional[int] = None,
    window_size: int = 256,
    sentences: bool = True,
    sdist: Optional[str] = None,
    train_cache_mb: int = 1024,
) -> Model[List[Doc], List[Floats2d]]:
    """Per token, LAC's tagger's contextual features, frozen: use it as the lac_features of
    spacy-cner.CharBigramEmbed.v3.

    hidden (bool): The states of the tagger's top BiGRU layer (2 x 128, forward then backward).
    emissions (bool): Its emission scores (49 tags).
    projected_width (Optional[int]): Project those on their projected_width principal directions in the
        initialize sample's characters (uncentered; fixed at initialize, saved as the param "P", never
        trained), so that the mixing layer reads fewer inputs. None: as they are.
    window_size (int): The most characters LAC reads at once; longer texts are cut at sentence ends, a longer
        sentence into overlapping windows (each character read from the one where it sits farthest from an edge).
    sentences (bool): Cut at every sentence end (。！？!?;；, newline): each sentence is read alone.
    sdist (Optional[str]): A local copy of LAC-2.1.2.tar.gz (sha256-checked); None: fetched through pip's index
        at initialize and cached (`python -m spacy_cner pretrained fetch` does it ahead). Only initialize reads it.
    train_cache_mb (int): In training, keep the windows' features up to this many MB (float32, per LAC id; about
        1.2 kB per character) and reuse them when the same window text comes again (the next epoch); 0: none.
        Not saved; prediction never reads it.
    RETURNS (Model[List[Doc], List[Floats2d]]): Features (n_tokens, nO) per doc, nO set at initialize:
        projected_width or 256 * hidden + 49 * emissions, plus 4 positions.
    """
    reading = reading_attrs(hidden, emissions, window_size, sentences, sdist)
    if projected_width is not None and projected_width < 1:
        raise ValueError(f"LacFeatures: projected_width must be null or >= 1, got {projected_width}.")
    if train_cache_mb < 0:
        raise ValueError(f"LacFeatures: train_cache_mb must be >= 0, got {train_cache_mb}.")
    shim = InPlacePyTorchShim(
        LacEncoder(), serialize_model=serialize_rebuildable, deserialize_model=deserialize_rebuildable
    )
    # In the order saved pipelines hold them (the model's bytes list its attrs in order).
    attrs = {
        "hidden": hidden,
        "emissions": emissions,
        "projected_width": projected_width,
        **reading,
        "last_batch": LastBatch(),
        "train_cache": TrainCache(train_cache_mb * 2**20),
    }
    params = {"P": None} if projected_width is not None else {}
    return Model("lac_features", forward, init=init, dims={"nO": None}, params=params, attrs=attrs, shims=[shim])


def reading_attrs(hidden: bool, emissions: bool, window_size: int, sentences: bool, sdist: Optional[str]) -> dict:
    """The attrs both versions read LAC by (what it outputs, how texts are cut, where its weights come from),
    checked."""
    if not (hidden or emissions):
        raise ValueError("LacFeatures: hidden and emissions are both false: set at least one to true.")
    if window_size < 2:
        raise ValueError(f"LacFeatures: window_size must be >= 2 characters, got {window_size}.")
    return {
        "hidden": hidden,
        "emissions": emissions,
        "window_size": window_size,
        "sentences": sentences,
        "sdist": sdist,
    }


@registry.layers("spacy-cner.LacFeatures.v2")
def LacFeatures_v2(
    hidden: bool = True,
    emissions: bool = True,
    projected_width: Optional[int] = None,
    window_size: int = 256,
    sentences: bool = True,
    sdist: Optional[str] = None,
    train_cache_mb: Optional[int] = None,
    fine_tune: bool = False,
    frozen_layers: int = 0,
    learn_rate_scale: float = 1.0,
    scalar_mix: Optional[Model] = None,
    lexicon_adapter: Optional[Model] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """LacFeatures.v1, or with fine_tune LAC's tagger as a trained encoder: its id embeddings and BiGRU layers
    take gradients (those below frozen_layers excepted), optionally with the seed papers' mechanisms on it.
    Use it as the tok2vec of spacy-cner.CRFTagger.v1 (LAC -> BiLSTM -> CRF, as BERT-BiLSTM-CRF) or as the
    lac_features of spacy-cner.CharBigramEmbed.v3 (beside the hash embeddings and SoftLexicon).

    hidden, emissions, projected_width, window_size, sentences, sdist, train_cache_mb: as LacFeatures.v1's
        (train_cache_mb None: v1's 1024). With fine_tune, projected_width and train_cache_mb must be null: the
        features change with every update (each window's LAC ids, which do not, are kept instead).
    fine_tune (bool): Train LAC's weights (False: v1, frozen).
    frozen_layers (int): With fine_tune, keep the lowest layers frozen: 0 none, 1 the id embeddings, 2 those and
        BiGRU layer 1. The emission fc is trained when emissions is true.
    learn_rate_scale (float): LAC's weights learn at this multiple of the optimizer's rate (the scalar mix and
        the adapter, new weights, at the optimizer's own); the embeddings are updated row by row (the rows the
        batch read: lazy Adam, as torch's SparseAdam), the 58,224 x 128 table's dense update would cost most of
        a step.
    scalar_mix (Optional[Model]): spacy-cner.ScalarMix.v1: with hidden, the states are a trained mix of every
        layer's (dynamic fusion, NEZHA-BiLSTM-CRF eqs. 11-12): the id embeddings (tiled to the states' width:
        LAC's 128 as [e, e], what each direction reads), BiGRU layer 1 (after the adapter if any) and layer 2.
        None: the top layer's states.
    lexicon_adapter (Optional[Model]): spacy-cner.LexiconAdapter.v1 between BiGRU layers 1 and 2 (LEBERT's
        placement after layer 1), over the lexicon words that cover each LAC unit (word or character).
        Inside LAC it adds the fused words to the states with no LayerNorm (LEBERT's eq. 7 normalises what is
        a transformer's normalised output already; LAC's states are not), its output weights start at zero:
        the adapter begins as the identity and layer 2 reads the states it was trained on.
    RETURNS (Model[List[Doc], List[Floats2d]]): Features (n_tokens, nO) per doc, nO set at initialize.
    """
    if not fine_tune:
        if scalar_mix is not None or lexicon_adapter is not None:
            raise ValueError(
                "LacFeatures.v2: scalar_mix and lexicon_adapter act inside LAC's network and need fine_tune = true "
                "(frozen, LAC's states would not change with them)."
            )
        if frozen_layers != 0 or learn_rate_scale != 1.0:
            raise ValueError(
                "LacFeatures.v2: frozen_layers and learn_rate_scale act on LAC's trained weights and need "
                f"fine_tune = true (got frozen_layers = {frozen_layers}, learn_rate_scale = {learn_rate_scale}); "
                "frozen, leave them at 0 and 1.0."
            )
        cache_mb = 1024 if train_cache_mb is None else train_cache_mb
        return LacFeatures(hidden, emissions, projected_width, window_size, sentences, sdist, cache_mb)
    attrs = reading_attrs(hidden, emissions, window_size, sentences, sdist)
    if projected_width is not None:
        raise ValueError(
            "LacFeatures.v2: projected_width is fixed at initialize from LAC's frozen features: set it to null "
            "with fine_tune = true."
        )
    if train_cache_mb is not None:
        raise ValueError(
            "LacFeatures.v2: train_cache_mb keeps frozen features, and fine-tuned ones change with every update: "
            "set it to null with fine_tune = true (each window's LAC ids are kept instead)."
        )
    if frozen_layers not in (0, 1, 2):
        raise ValueError(f"LacFeatures.v2: frozen_layers must be 0, 1 or 2, got {frozen_layers}.")
    if scalar_mix is not None and not hidden:
        raise ValueError("LacFeatures.v2: scalar_mix mixes LAC's states: it needs hidden = true.")
    if learn_rate_scale <= 0:
        raise ValueError(f"LacFeatures.v2: learn_rate_scale must be > 0, got {learn_rate_scale}.")
    shim = TrainedLacShim(
        LacEncoder(), serialize_model=serialize_rebuildable, deserialize_model=deserialize_rebuildable
    )
    attrs.update(frozen_layers=frozen_layers, learn_rate_scale=learn_rate_scale, id_cache=IdCache())
    layers, refs = [], {}
    for name, layer in (("scalar_mix", scalar_mix), ("lexicon_adapter", lexicon_adapter)):
        if layer is not None:
            layers.append(layer)
            refs[name] = layer
    if lexicon_adapter is not None:
        lexicon_adapter.attrs["layer_norm"] = False
        lexicon_adapter.attrs["zero_output"] = True
    return Model(
        "lac_encoder",
        forward_trained,
        init=init_trained,
        dims={"nO": None},
        attrs=attrs,
        shims=[shim],
        layers=layers,
        refs=refs,
    )


def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    """The features of each doc's tokens; nothing to backpropagate. In training the batch's features are kept for
    an adversarial update's second pass over the same docs (LastBatch, as SoftLexicon's)."""
    module = built_encoder(model)
    texts, spans = [doc_text(doc) for doc in docs], [token_spans(doc) for doc in docs]

    def compute() -> List[numpy.ndarray]:
        cache = model.attrs.get("train_cache") if is_train else None
        if cache is not None:
            cache.check(module)
        chars = char_features(model, module, texts, cache=cache)
        return [token_means(doc_chars, doc_spans) for doc_chars, doc_spans in zip(chars, spans)]

    values = model.attrs["last_batch"].features(module, texts, spans, compute) if is_train else compute()
    return [model.ops.asarray2f(doc_values) for doc_values in values], lambda d_features: []


def init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    """Read LAC's tagger from the sdist (unless loaded already), fit the projection, set nO."""
    if not torch_module(model).is_built:
        set_torch_module(model, LacEncoder.from_sdist(open_lac(model.attrs["sdist"])))
    if "train_cache" in model.attrs:
        model.attrs["train_cache"].clear()
    module = torch_module(model)
    width = module.feature_width(model.attrs["hidden"], model.attrs["emissions"])
    projected_width = model.attrs["projected_width"]
    if projected_width is not None:
        if projected_width > width:
            raise ValueError(
                f"LacFeatures: projected_width {projected_width} is more than the {width} features it "
                "projects: lower it or set it to null."
            )
        chars = char_features(model, module, [doc_text(doc) for doc in X or []], project=False)
        sample = numpy.concatenate([numpy.zeros((0, width + len(POSITIONS)), "float32")] + chars)[:, :width]
        if not len(sample):
            raise ValueError(
                "LacFeatures with projected_width needs sample docs with text at initialize, to find the "
                "principal directions of LAC's features."
            )
        model.set_param("P", model.ops.asarray2f(principal_directions(sample, projected_width)))
        width = projected_width
    model.set_dim("nO", width + len(POSITIONS), force=True)


class LacEncoder(torch.nn.Module, RebuildableModule):
    """LAC's tagger network with the text analysis that gives it ids (vocabulary, q2b.dic, dictionary segmenter).

    Built with no arguments it is a placeholder (is_built False) until init reads the sdist; the arguments are
    saved beside the weights (RebuildableModule), so a saved pipeline rebuilds it without the sdist.

    vocabulary (Optional[List[str]]): lac_model/conf/word.dic's tokens by id.
    replacements (Optional[Dict[str, str]]): q2b.dic.
    tags (Optional[List[str]]): tag.dic's tags by id (the emission scores' columns).
    segment_words (Optional[List[str]]): small_seg.dic's words.
    segment_total (int): The sum of small_seg.dic's counts.
    input_width (int): Width of the id embeddings.
    hidden_width (int): Width of each GRU.
    """

    def __init__(
        self,
        vocabulary: Optional[List[str]] = None,
        replacements: Optional[Dict[str, str]] = None,
        tags: Optional[List[str]] = None,
        segment_words: Optional[List[str]] = None,
        segment_total: int = 0,
        input_width: int = 0,
        hidden_width: int = 0,
    ):
        super().__init__()
        self.hparams: Dict[str, Any] = {
            "vocabulary": vocabulary,
            "replacements": replacements,
            "tags": tags,
            "segment_words": segment_words,
            "segment_total": segment_total,
            "input_width": input_width,
            "hidden_width": hidden_width,
        }
        self.tagger: Optional[LacTagger] = None
        if vocabulary is not None:
            if replacements is None or tags is None or segment_words is None:
                raise ValueError("LacEncoder: a vocabulary needs its replacements, tags and segment_words too.")
            self.network = LacNetwork(len(vocabulary), input_width, hidden_width, len(tags))
            lexicon = Lexicon(list(vocabulary), dict(replacements), list(tags))
            self.tagger = LacTagger(self.network, lexicon, DictionarySegmenter(segment_words, segment_total))

    @classmethod
    def from_sdist(cls, lac: LacFiles) -> "LacEncoder":
        """The encoder of the checked sdist's tagger (lac_analyzer.tagger_from_sdist)."""
        return cls.from_tagger(tagger_from_sdist(lac))

    @classmethod
    def from_tagger(cls, tagger: LacTagger) -> "LacEncoder":
        """The encoder of a LacTagger, its weights copied."""
        network = tagger.network
        module = cls(
            tagger.lexicon.vocabulary,
            tagger.lexicon.replacements,
            tagger.lexicon.tags,
            tagger.segmenter.words,
            tagger.segmenter.total_count,
            network.embedding.embedding_dim,
            network.layers[0].forward_gru.hidden_width,
        )
        module.network.load_state_dict(network.state_dict())
        return module

    @property
    def is_built(self) -> bool:
        return self.tagger is not None

    def get_input_embeddings(self) -> Optional[torch.nn.Embedding]:
        """The id embeddings when they are trained (FGM perturbs them), else None."""
        if self.tagger is None or not self.network.embedding.weight.requires_grad:
            return None
        return self.network.embedding

    def forward(
        self,
        ids: torch.Tensor,
        lengths: torch.Tensor,
        hidden: bool = True,
        emissions: bool = True,
        all_layers: bool = False,
        between: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """LacFeatures.v2's pass: ids (batch, length), lengths (batch,) -> the states (n_layers, batch, length, 2H)
        of the top layer, or of every layer with all_layers (the embeddings as [e, e]), empty without hidden,
        and the emission scores (batch, length, tags), empty without emissions. between: LacNetwork.layer_states'.
        The embeddings' gradient is sparse (the rows read), for their row-wise update (TrainedLacShim) and FGM."""
        states = self.network.layer_states(ids, lengths, between)
        top = states[-1]
        if hidden and all_layers:
            # The embeddings tiled to the states' width: LAC's 128 as [e, e], each direction's input.
            repeats = -(-top.shape[-1] // states[0].shape[-1])
            embeddings = torch.cat([states[0]] * repeats, dim=-1)[..., : top.shape[-1]]
            layers = torch.stack([embeddings] + states[1:])
        else:
            layers = top.unsqueeze(0) if hidden else top.new_zeros((0,) + top.shape)
        scores = self.network.emission(top) if emissions else top.new_zeros(top.shape[:2] + (0,))
        return layers, scores

    def set_trainable(self, frozen_layers: int, emissions: bool) -> None:
        """Gradients for the weights above the frozen_layers lowest (LacFeatures.v2's fine_tune); the embeddings'
        sparse: a dense one (the whole table) per group of windows cost a tenth of a step."""
        self.network.set_trainable(frozen_layers < 1, [frozen_layers < 2, True], emissions)
        self.network.embedding.sparse = True

    def feature_width(self, hidden: bool, emissions: bool) -> int:
        """The width of encode's rows."""
        return (2 * self.hparams["hidden_width"] if hidden else 0) + (len(self.hparams["tags"]) if emissions else 0)

    @torch.no_grad()
    def encode(self, sequences: Sequence[Sequence[int]], hidden: bool, emissions: bool) -> List[numpy.ndarray]:
        """Per id sequence, float32 (n_ids, feature_width): the top states and/or the emission scores. The sequences
        run sorted by length in groups (GROUP_SIZE, GROUP_IDS), each padded to its longest."""
        assert self.tagger is not None
        device = self.network.crf_weights.device
        results: List[numpy.ndarray] = [numpy.zeros((0, self.feature_width(hidden, emissions)), "float32")] * len(
            sequences
        )
        for group in length_groups([len(ids) for ids in sequences]):
            lengths = numpy.asarray([len(sequences[i]) for i in group], dtype="int64")
            padded = numpy.zeros((len(group), int(lengths.max())), dtype="int64")
            for row, i in enumerate(group):
                padded[row, : lengths[row]] = sequences[i]
            states, scores = self.network.encode(
                torch.from_numpy(padded).to(device), torch.from_numpy(lengths).to(device)
            )
            features = torch.cat([states] * hidden + [scores] * emissions, dim=-1).float().cpu().numpy()
            for row, i in enumerate(group):
                results[i] = features[row, : lengths[row]]
        return results


def built_encoder(model: Model) -> LacEncoder:
    module = torch_module(model)
    if not module.is_built:
        raise ValueError(
            "LacFeatures has no weights: initialize the pipeline (they are read from LAC's sdist) or "
            "load a pipeline that was saved with them."
        )
    return module


def char_features(
    model: Model,
    module: LacEncoder,
    texts: Sequence[str],
    project: bool = True,
    cache: Optional["TrainCache"] = None,
) -> List[numpy.ndarray]:
    """Per text, float32 (n_characters, width + 4): the features of the LAC id covering each character (projected
    by "P" when project and the layer has it), then the character's position in the id's word. With a cache, the
    windows it holds are not run again and those it lacks are added to it."""
    hidden, emissions = model.attrs["hidden"], model.attrs["emissions"]
    projection = model.ops.to_numpy(model.get_param("P")) if project and model.has_param("P") else None
    pieces = [(index, window) for index, text in enumerate(texts) for window in text_windows(model, text)]
    window_texts = [texts[index][window.start : window.end] for index, window in pieces]
    found: List[Optional[Tuple[numpy.ndarray, List[int]]]] = [
        cache.get(text) if cache is not None else None for text in window_texts
    ]
    missing = [i for i, entry in enumerate(found) if entry is None]
    prepared = [module.tagger.ids(window_texts[i]) for i in missing]
    encoded = module.encode([ids for ids, _ in prepared], hidden, emissions) if missing else []
    for i, (_, lengths), features in zip(missing, prepared, encoded):
        found[i] = (features, lengths)
        if cache is not None:
            cache.put(window_texts[i], features, lengths)
    width = module.feature_width(hidden, emissions) if projection is None else projection.shape[1]
    out = [numpy.zeros((len(text), width + len(POSITIONS)), dtype="float32") for text in texts]
    for (index, window), (features, lengths) in zip(pieces, found):
        if projection is not None:
            features = features @ projection
        unit, position = word_positions(lengths)
        own = slice(window.own_start - window.start, window.own_end - window.start)
        rows = out[index][window.own_start : window.own_end]
        rows[:, :width] = features[unit[own]]
        rows[numpy.arange(len(rows)), width + position[own]] = 1.0
    return out


def forward_trained(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    """LacFeatures.v2 fine-tuned: LAC's network (with the adapter after layer 1, the scalar mix over its layers)
    over each doc's windows, each LAC unit's row given to the characters it covers (with their B/M/E/S position),
    a token's the mean of its characters'; the backprop takes the gradient back through all of it."""
    module = built_encoder(model)
    hidden, emissions = model.attrs["hidden"], model.attrs["emissions"]
    if is_train:
        module.set_trainable(model.attrs["frozen_layers"], emissions)
    mix = model.get_ref("scalar_mix") if model.has_ref("scalar_mix") else None
    adapter = model.get_ref("lexicon_adapter") if model.has_ref("lexicon_adapter") else None
    texts, spans = [doc_text(doc) for doc in docs], [token_spans(doc) for doc in docs]
    pieces = [(index, window) for index, text in enumerate(texts) for window in text_windows(model, text)]
    window_texts = [texts[index][window.start : window.end] for index, window in pieces]
    units = [model.attrs["id_cache"].get(module, text, adapter) for text in window_texts]
    device = module.network.crf_weights.device
    if adapter is not None:
        torch_module(adapter).train(is_train)
    state_rows: List[numpy.ndarray] = [numpy.zeros((0, 0, 0), "float32")] * len(pieces)
    score_rows: List[numpy.ndarray] = [numpy.zeros((0, 0), "float32")] * len(pieces)
    runs = []  # (group, padded length, torch backprop)
    for group in length_groups([len(unit[0]) for unit in units]):
        lengths = numpy.asarray([len(units[i][0]) for i in group], dtype="int64")
        padded = numpy.zeros((len(group), int(lengths.max())), dtype="int64")
        for row, i in enumerate(group):
            padded[row, : lengths[row]] = units[i][0]
        between = None
        if adapter is not None:
            word_ids = numpy.full(padded.shape + (adapter.attrs["max_words_per_char"],), -1, dtype="int64")
            for row, i in enumerate(group):
                word_ids[row, : lengths[row]] = units[i][2]
            between = functools.partial(fuse, adapter, ids=word_ids)
        inputs = ArgsKwargs(
            args=(torch.from_numpy(padded).to(device), torch.from_numpy(lengths).to(device)),
            kwargs={"hidden": hidden, "emissions": emissions, "all_layers": mix is not None, "between": between},
        )
        (layers, scores), backprop_torch = model.shims[0](inputs, is_train)
        layers_np, scores_np = torch2xp(layers.detach()), torch2xp(scores.detach())
        for row, i in enumerate(group):
            state_rows[i] = layers_np[:, row, : lengths[row]]
            score_rows[i] = scores_np[row, : lengths[row]]
        runs.append((group, padded.shape[1], (layers, scores), backprop_torch))
    backprop_mix = None
    if mix is not None:
        states, backprop_mix = mix([model.ops.asarray3f(rows) for rows in state_rows], is_train)
        states = [model.ops.to_numpy(state) for state in states]
    elif hidden:
        states = [rows[0] for rows in state_rows]
    else:
        states = [numpy.zeros((len(scores), 0), "float32") for scores in score_rows]
    unit_features = [numpy.concatenate([state, scores], axis=1) for state, scores in zip(states, score_rows)]
    width = model.get_dim("nO") - len(POSITIONS)
    chars = [numpy.zeros((len(text), width + len(POSITIONS)), dtype="float32") for text in texts]
    placements = []  # per piece: the unit of each own character, the own characters' slice in the doc
    for k, (index, window) in enumerate(pieces):
        unit, position = word_positions(units[k][1])
        own = slice(window.own_start - window.start, window.own_end - window.start)
        rows = chars[index][window.own_start : window.own_end]
        if len(unit_features[k]):
            rows[:, :width] = unit_features[k][unit[own]]
        rows[numpy.arange(len(rows)), width + position[own]] = 1.0
        placements.append((unit[own], slice(window.own_start, window.own_end)))
    Y = [model.ops.asarray2f(token_means(doc_chars, doc_spans)) for doc_chars, doc_spans in zip(chars, spans)]

    def backprop(dY: List[Floats2d]) -> List[Doc]:
        d_chars = [
            token_means_backward(model.ops.to_numpy(dy)[:, :width], doc_spans, len(text))
            for dy, doc_spans, text in zip(dY, spans, texts)
        ]
        d_units = [numpy.zeros((len(units[k][0]), width), dtype="float32") for k in range(len(pieces))]
        for k, ((index, _), (own_units, own_chars)) in enumerate(zip(pieces, placements)):
            numpy.add.at(d_units[k], own_units, d_chars[index][own_chars])
        n_states = state_width(model, module) if hidden else 0
        d_states = [d[:, :n_states] for d in d_units]
        d_layers = (
            [model.ops.to_numpy(d) for d in backprop_mix([model.ops.asarray2f(d) for d in d_states])]
            if backprop_mix is not None
            else [d[None] for d in d_states]
        )
        for group, length, (layers, scores), backprop_torch in runs:
            d_layer_batch = numpy.zeros(tuple(layers.shape), dtype="float32")
            d_score_batch = numpy.zeros(tuple(scores.shape), dtype="float32")
            for row, i in enumerate(group):
                n = len(units[i][0])
                if hidden:
                    d_layer_batch[:, row, :n] = d_layers[i]
                d_score_batch[row, :n] = d_units[i][:, n_states:]
            pairs = [(t, g) for t, g in ((layers, d_layer_batch), (scores, d_score_batch)) if t.requires_grad]
            tensors = [t for t, _ in pairs]
            grads = [torch.from_numpy(g).to(t.device) for t, g in pairs]
            backprop_torch(ArgsKwargs(args=(tensors,), kwargs={"grad_tensors": grads}))
        return []

    return Y, backprop


def init_trained(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    """Read LAC's tagger from the sdist (unless loaded already), build the mix and the adapter, set nO."""
    if not torch_module(model).is_built:
        set_torch_module(model, LacEncoder.from_sdist(open_lac(model.attrs["sdist"])))
    model.attrs["id_cache"].clear()
    module = torch_module(model)
    states = state_width(model, module)
    if model.has_ref("scalar_mix"):
        mix = model.get_ref("scalar_mix")
        n_layers = 1 + len(module.network.layers)
        if mix.has_dim("nL") and mix.get_dim("nL") != n_layers:
            raise ValueError(
                f"LacFeatures.v2's scalar_mix mixes LAC's {n_layers} layers (embeddings, 2 BiGRU layers): set its "
                f"n_layers to null or {n_layers}, not {mix.get_dim('nL')}."
            )
        if not mix.has_dim("nL"):
            mix.set_dim("nL", n_layers)
        mix.initialize()
    if model.has_ref("lexicon_adapter"):
        adapter = model.get_ref("lexicon_adapter")
        adapter.set_dim("nI", 2 * module.hparams["hidden_width"], force=True)
        adapter.initialize()
    scores = len(module.hparams["tags"]) if model.attrs["emissions"] else 0
    model.set_dim("nO", states + scores + len(POSITIONS), force=True)


def state_width(model: Model, module: "LacEncoder") -> int:
    """The width of the states LacFeatures.v2 gives (0 without hidden)."""
    return 2 * module.hparams["hidden_width"] if model.attrs["hidden"] else 0


class TrainedLacShim(InPlacePyTorchShim):
    """LacFeatures.v2's shim: the id embeddings updated on the rows the batch read (key_embed.update_table_rows,
    the optimizer's own rule on those rows), every other weight as InPlacePyTorchShim updates it."""

    def finish_update(self, optimizer: Any) -> None:
        module = self._model
        if getattr(module, "tagger", None) is not None:
            weight = module.network.embedding.weight
            if weight.grad is not None and weight.grad.is_sparse:
                gradient = weight.grad.coalesce()  # the rows read, each once
                rows = torch2xp(gradient.indices()[0])
                key = (self.id, "network.embedding.weight")
                update_table_rows(optimizer, key, torch2xp(weight.data), rows, torch2xp(gradient.values()))
                weight.grad = None
        finish_update_in_place(self, optimizer)


class IdCache:
    """Per window text, LAC's ids and the characters each covers (and the lexicon words over each LAC unit, for an
    adapter), up to max_entries windows.

    Why a cache of our own: these depend on the text only, and LAC's dictionary cut and the lexicon's matching
    are a share of a fine-tuned step that every epoch would repeat. Cleared at initialize; not saved or pickled.
    """

    def __init__(self, max_entries: int = 500_000) -> None:
        self.max_entries = max_entries
        self.clear()

    def clear(self) -> None:
        self._entries: Dict[Tuple[str, int], Tuple[List[int], List[int], Optional[numpy.ndarray]]] = {}

    def get(
        self, module: "LacEncoder", text: str, adapter: Optional[Model] = None
    ) -> Tuple[List[int], List[int], Optional[numpy.ndarray]]:
        key = (text, id(adapter.attrs["lexicon"].lexicon) if adapter is not None else 0)
        entry = self._entries.get(key)
        if entry is None:
            ids, lengths = module.tagger.ids(text)
            words = None
            if adapter is not None:
                ends = numpy.cumsum(lengths, dtype="int64")
                words = word_ids(adapter, text, list(zip((ends - lengths).tolist(), ends.tolist())))
            entry = (ids, lengths, words)
            if len(self._entries) < self.max_entries:
                self._entries[key] = entry
        return entry

    def __getstate__(self) -> Dict:
        return {"max_entries": self.max_entries, "_entries": {}}


class TrainCache:
    """LAC's features (per id) and the ids' lengths of window texts seen in training, up to max_bytes of features.

    Why a cache of our own: the features are frozen and depend on the window's text only, and a training reads the
    same sentences every epoch (LAC's network is most of a lac_context training step). It fills until full and then
    keeps what it has (an epoch reads the windows in a new order, so evicting would only churn). The arrays handed
    out are read-only. Not saved, not pickled; initialize empties it, and so does check when the weights changed
    (loaded into the layer: torch counts each in-place write of a tensor in its _version).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.clear()

    def clear(self) -> None:
        self._entries: Dict[str, Tuple[numpy.ndarray, List[int]]] = {}
        self.n_bytes = 0
        self._weights: Optional[Tuple[int, ...]] = None

    def check(self, module: torch.nn.Module) -> None:
        """Empty the cache if the module's weights were written since the last check."""
        weights = (id(module),) + tuple(tensor._version for tensor in module.state_dict().values())
        if weights != self._weights:
            self.clear()
            self._weights = weights

    def get(self, text: str) -> Optional[Tuple[numpy.ndarray, List[int]]]:
        return self._entries.get(text)

    def put(self, text: str, features: numpy.ndarray, lengths: List[int]) -> None:
        if text in self._entries or self.n_bytes + features.nbytes > self.max_bytes:
            return
        features = features.copy()  # encode's rows are views of their padded group
        features.setflags(write=False)
        self._entries[text] = (features, list(lengths))
        self.n_bytes += features.nbytes

    def __len__(self) -> int:
        return len(self._entries)

    def __getstate__(self) -> Dict:
        return {"max_bytes": self.max_bytes, "_entries": {}, "n_bytes": 0, "_weights": None}


def text_windows(model: Model, text: str):
    """lac_analyzer.text_windows with the layer's window_size and sentences settings."""
    return lac_text_windows(text, model.attrs["window_size"], every_sentence=model.attrs["sentences"])


def word_positions(lengths: Sequence[int]) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Per character of words of these lengths, the index of its word and its position in it (B, M, E or S)."""
    lengths = numpy.asarray(lengths, dtype="int64")
    unit = numpy.repeat(numpy.arange(len(lengths)), lengths)
    offset = numpy.arange(len(unit)) - numpy.repeat(numpy.cumsum(lengths) - lengths, lengths)
    length = lengths[unit]
    position = numpy.where(length == 1, S, numpy.where(offset == 0, B, numpy.where(offset == length - 1, E, M)))
    return unit, position
