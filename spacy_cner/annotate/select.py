"""What to annotate next: unlabelled texts ranked by how unsure crf_ner is of them (active learning).

crf_ner's CRF gives exact marginals (forward-backward): the probability of every tag at every token
and of every entity span. A strategy turns them into one score per text (higher: more worth
labelling); the top N texts, near-duplicates left out, go to the annotation tool with the model's
entities pre-filled, in a format `python -m spacy_cner convert` reads back once they are annotated.

Strategies (STRATEGIES): see spacy_cner.annotate.uncertainty (crf_ner computes them). The texts
are scored by a run of annotate (an AnnotateJob: the model and its engine's settings) into
OUTPUT.scores/, whose shards and state select reads back.
"""

import dataclasses
import heapq
import io
import json
import math
import random
import shutil
import time
import warnings
import zlib
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, TypeVar

import numpy
from spacy.language import Language
from spacy.tokens import Doc

from ..corpus.formats import FORMATS, TOOL_FORMATS
from ..corpus.json_files import write_json_records
from ..corpus.record_fields import AnnotatedText, span_dicts
from .uncertainty import STRATEGIES, scoring_pipe
from . import annotate
from .inputs import Source, find_sources, input_sources
from .job import AnnotateJob
from .outputs import ShardWriter
from .owned_files import OwnedFiles
from .resume import STATE_DIR, changed_source, model_fingerprint, read_state

# select's own JSON lines (the row's fields, the model's entities and how the text was selected), and
# the annotation tools' formats (corpus.formats).
OUTPUT_FORMATS = ("jsonl",) + TOOL_FORMATS
# The ranked pool holds this many times N texts, so that N remain after near-duplicates are left out.
POOL_FACTOR = 4
# The field of OUTPUT.scores/'s records holding the model's entities and the score (a row that
# already has it is a bad row, as in annotate).
ENTITIES_FIELD = "spans"
# Character n-grams compared for near-duplicates.
SHINGLE = 3
Item = TypeVar("Item")


@dataclasses.dataclass
class Candidate:
    """One scored text and what goes to the annotation tool."""

    score: float
    order: int  # its position in the input: ties go to the earlier text
    where: str  # "file, line N"
    fields: Dict[str, Any]
    text: str
    # (start char, end char, label, probability) of the model's entities
    entities: List[Tuple[int, int, str, Optional[float]]]
    drawn: bool = False  # drawn at random (explore), not taken from the top of the ranking
    # With density: its Typicality in the input (ranked by score * typicality ** density).
    typicality: Optional[float] = None


@dataclasses.dataclass
class SelectSummary:
    """What a `select` run read and wrote."""

    texts: int = 0
    errors: int = 0
    selected: int = 0
    drawn: int = 0  # of the selected, drawn at random (explore)
    near_duplicates: int = 0
    seconds: float = 0.0  # the whole run
    characters: int = 0  # of the texts scored by this run (a resumed run: those not scored before)
    scoring_seconds: float = 0.0  # scoring them, the pipeline's loading left out

    @property
    def chars_per_second(self) -> float:
        """The scoring's characters a second (as annotate's, the pipeline's loading left out)."""
        return self.characters / self.scoring_seconds if self.scoring_seconds else 0.0


def score_docs(nlp: Language, texts: Sequence[str], strategy: str, seed: int = 0) -> Tuple[List[Doc], List[float]]:
    """Run the pipeline over texts, crf_ner scoring each doc on the way (its `uncertainty` setting,
    doc._.uncertainty); each doc and its score.

    nlp (Language): A pipeline with one crf_ner component (the components before it run first).
    texts (Sequence[str]): The texts.
    strategy (str): One of STRATEGIES.
    seed (int): The random strategy's seed.
    RETURNS (Tuple[List[Doc], List[float]]): The annotated docs and their scores.
    """
    pipe = nlp.get_pipe(scoring_pipe(nlp))
    previous = (pipe.uncertainty, pipe.uncertainty_seed)
    pipe.uncertainty, pipe.uncertainty_seed = strategy, seed
    try:
        docs = list(nlp.pipe(texts))
    finally:
        pipe.uncertainty, pipe.uncertainty_seed = previous
    return docs, [doc._.uncertainty for doc in docs]


class NearDuplicates:
    """Texts kept one by one, refusing any whose character 3-grams overlap a kept text's by at least
    threshold (Jaccard similarity).

    MinHash signatures in bands (locality-sensitive hashing) find the kept texts worth comparing
    (a pair at Jaccard 0.7 shares a band with probability 0.99 with 64 hashes in 16 bands) and the
    exact Jaccard of their 3-gram sets decides. Why not datasketch's MinHashLSH: it gives candidates
    only, so the exact check stays here either way, and what it would replace is these 30 lines of
    numpy: not worth one more requirement of the core install (scipy, which it needs, gensim brings
    already). The result is the same on every run (seeded hashes).
    """

    def __init__(self, threshold: float, num_perm: int = 64, bands: int = 16, seed: int = 0):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"The near-duplicate threshold is a Jaccard similarity in (0, 1], got {threshold}.")
        if num_perm % bands:
            raise ValueError(f"num_perm ({num_perm}) must be a multiple of bands ({bands}).")
        rng = numpy.random.default_rng(seed)
        self.threshold, self.bands, self.rows = threshold, bands, num_perm // bands
        self.a = rng.integers(1, 2**31 - 1, size=num_perm, dtype="uint64")
        self.b = rng.integers(0, 2**31 - 1, size=num_perm, dtype="uint64")
        self.buckets: List[Dict[bytes, List[int]]] = [{} for _ in range(bands)]
        self.kept: List[Set[str]] = []

    def add(self, text: str) -> bool:
        """Keep text unless it is a near-duplicate of a kept one; whether it was kept."""
        shingles = _shingles(text)
        signature = self._signature(shingles)
        keys = [signature[i * self.rows : (i + 1) * self.rows].tobytes() for i in range(self.bands)]
        seen: Set[int] = set()
        for bucket, key in zip(self.buckets, keys):
            for other in bucket.get(key, ()):
                if other not in seen:
                    seen.add(other)
                    if _jaccard(shingles, self.kept[other]) >= self.threshold:
                        return False
        index = len(self.kept)
        self.kept.append(shingles)
        for bucket, key in zip(self.buckets, keys):
            bucket.setdefault(key, []).append(index)
        return True

    def _signature(self, shingles: Set[str]) -> numpy.ndarray:
        hashes = numpy.fromiter(
            (zlib.crc32(s.encode("utf8", "surrogatepass")) for s in shingles), dtype="uint64", count=len(shingles)
        )
        # (a h + b) mod the Mersenne prime 2^61 - 1: a < 2^31 and h < 2^32 keep it in 64 bits.
        mixed = (self.a[:, None] * hashes[None, :] + self.b[:, None]) % numpy.uint64(2**61 - 1)
        return mixed.min(axis=1)


def pick(
    ranked: Iterable[Item],
    drawn: Iterable[Item],
    n: int,
    explore: float,
    keep: Callable[[Item], bool] = lambda item: True,
) -> Tuple[List[Item], List[Item]]:
    """The top n - round(n * explore) of ranked (best first), then items of drawn (the other candidates
    in a random order) until n in all; an item joins only if keep(item) (e.g. NearDuplicates.add),
    asked once per item: drawn may hold ranked's objects (told apart by identity), and one taken or
    refused there is passed over. Why: a share drawn at random hedges against what a weak model
    cannot see yet (BENCHMARKS.md measures it).

    RETURNS (Tuple[List[Item], List[Item]]): Those from the ranking, those drawn.
    """
    if not 0.0 <= explore < 1.0:
        raise ValueError(f"explore is the share of the texts drawn at random, in [0, 1), got {explore}.")
    top, asked = n - round(n * explore), set()
    chosen: Tuple[List[Item], List[Item]] = ([], [])
    for part, items, size in ((0, ranked, top), (1, drawn, n)):
        for item in items:
            if len(chosen[0]) + len(chosen[1]) >= size:
                break
            if id(item) not in asked:
                asked.add(id(item))
                if keep(item):
                    chosen[part].append(item)
    return chosen


def power_key(score: float, power: float, rng: random.Random) -> float:
    """A text's key for stochastic power acquisition (Kirsch et al. 2023): the n texts of the largest
    keys are a draw without replacement, each with a probability proportional to score ** power
    (power * log(score) plus Gumbel noise: the Gumbel-top-k trick, Kool et al. 2019). A score of 0 is
    never drawn before a positive one. Why a draw and not the n best: the best n of one model's
    ranking are often alike in what the model misses (one batch, many texts of one blind spot); the
    draw keeps the high scores likely and spreads the rest. Larger powers come closer to the top n.

    rng (random.Random): Draws one uniform number per key (seeded: the same draw again).
    """
    uniform = rng.random()  # in [0, 1); 0 would make the noise infinite
    noise = -math.log(-math.log(uniform)) if uniform > 0.0 else -math.inf
    return power * math.log(score) + noise if score > 0.0 else -math.inf


class Typicality:
    """How typical of the pool a text is: the mean cosine similarity of its character uni- and
    bigram TF-IDF vector to every pool text's (information density, Settles and Craven 2008), in
    [0, 1]. Why: the most uncertain texts are often atypical (long, rare, noisy), so a ranking by
    uncertainty alone can label the pool's fringe and miss what most texts look like; score *
    typicality ** beta ranks by both (what it does to a learning curve: BENCHMARKS.md).

    The mean similarity to all N pool texts is the dot product of the text's unit vector with the
    pool's mean unit vector, so two passes over the pool (document frequencies, then that mean)
    compute it exactly, with memory for the n-grams only. The vectors come from the text alone,
    not from the model: the same on every engine. scikit-learn's TfidfVectorizer would hold the
    whole pool's matrix in memory; this streams.

    texts (Callable[[], Iterable[str]]): Gives the pool's texts, once per pass (twice).
    """

    def __init__(self, texts: Callable[[], Iterable[str]]):
        frequencies: Dict[str, int] = {}
        size = 0
        for text in texts():
            size += 1
            for gram in set(_grams(text)):
                frequencies[gram] = frequencies.get(gram, 0) + 1
        # Smoothed inverse document frequencies (as scikit-learn's smooth_idf): never 0.
        self._idf = {gram: math.log((1 + size) / (1 + count)) + 1.0 for gram, count in frequencies.items()}
        mean: Dict[str, float] = {}
        for text in texts():
            for gram, weight in self._unit(text).items():
                mean[gram] = mean.get(gram, 0.0) + weight / size
        self._mean = mean

    def __call__(self, text: str) -> float:
        """The text's mean cosine similarity to the pool's texts (a text not in the pool: its
        n-grams unseen there count 0)."""
        similarity = sum(weight * self._mean.get(gram, 0.0) for gram, weight in self._unit(text).items())
        return max(0.0, min(1.0, similarity))  # rounding can step outside [0, 1]

    def _unit(self, text: str) -> Dict[str, float]:
        counts: Dict[str, float] = {}
        for gram in _grams(text):
            counts[gram] = counts.get(gram, 0.0) + self._idf.get(gram, 0.0)
        norm = math.sqrt(sum(weight * weight for weight in counts.values()))
        return {gram: weight / norm for gram, weight in counts.items()} if norm else {}


def _grams(text: str) -> List[str]:
    """A text's characters and character bigrams, whitespace left out (Typicality's features)."""
    chars = [c for c in text if not c.isspace()]
    return chars + [a + b for a, b in zip(chars, chars[1:])]


def _shingles(text: str) -> Set[str]:
    if len(text) <= SHINGLE:
        return {text}
    return {text[i : i + SHINGLE] for i in range(len(text) - SHINGLE + 1)}


def _jaccard(a: Set[str], b: Set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def select(
    job: AnnotateJob,
    input_path: str,
    n: int,
    output: Path,
    *,
    strategy: str = "entropy",
    output_format: str = "jsonl",
    diversity: Optional[float] = 0.7,
    explore: float = 0.0,
    power: Optional[float] = None,
    density: Optional[float] = None,
    seed: int = 0,
    input_format: str = "auto",
    shard_size: int = 10_000,
    progress: bool = False,
) -> SelectSummary:
    """Rank the texts of input_path and write the top n, with the model's entities, to output.

    The texts are scored by `annotate` (crf_ner's `uncertainty` setting) into OUTPUT.scores/, shard
    by shard: a killed run started again with the same settings goes on from the shards written;
    other settings (another model, strategy, seed or input files) or an input file whose content
    changed since (its sha256, not only its size) start the folder afresh. The folder is
    removed once the selection is written.

    job (AnnotateJob): The model (a pipeline name or path, with a crf_ner component) and the settings
        its engine scores with, as annotate's (engine, batch_size, text_field, n_process, gpu_id, address,
        workers, gpus_per_worker); select sets its entities_field, uncertainty (strategy) and
        uncertainty_seed (seed).
    input_path (str): As annotate reads it: a .txt (a text per line), .jsonl (a "text" field),
        .parquet, .csv or .tsv file (a "text" column), a folder of them, or a glob.
    n (int): How many texts to write.
    output (Path): The output file (.jsonl, or .json for Label Studio); bad rows go to
        OUTPUT.errors.jsonl, naming their file and line. OUTPUT.select.json records what select wrote: an
        existing file is replaced only if select wrote it and nobody changed it since (else refused).
    strategy (str): One of STRATEGIES.
    output_format (str): One of OUTPUT_FORMATS.
    diversity (Optional[float]): Leave out a text whose character 3-grams overlap an already
        selected text's by at least this much (Jaccard); None: keep near-duplicates.
    explore (float): The share of the n texts drawn at random from those not at the top of the
        ranking (marked "explore" in the output), a hedge against what a weak model cannot see yet
        (BENCHMARKS.md measures what it saves).
    power (Optional[float]): Draw the n texts at random, each with a probability proportional to
        its score to this power (`power_key`; 1 is the paper's), instead of taking the n best.
        Not with explore, nor with the random strategy.
    density (Optional[float]): Rank by score * typicality ** density (information density,
        `Typicality`: how alike the text is to the input's texts, from their characters and bigrams),
        so that typical texts go first among the uncertain ones (1 is the paper's; BENCHMARKS.md measures
        smaller ones). Not with the random strategy.
    seed (int): The random strategy's seed (and the near-duplicate hashes', explore's and power's draw).
    input_format (str): "auto" (by suffix), "txt", "jsonl", "parquet", "csv" or "tsv".
    shard_size (int): Rows scored per shard of OUTPUT.scores/, the unit a restart skips.
    progress (bool): Show annotate's progress bar (rows, with a total and an ETA).
    RETURNS (SelectSummary): What was read and written; fewer than n selected only when the input
        holds fewer texts once bad rows and near-duplicates are left out.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}.")
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"Unknown output format {output_format!r}: expected one of {', '.join(OUTPUT_FORMATS)}.")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}.")
    if not 0.0 <= explore < 1.0:
        raise ValueError(f"explore is the share of the texts drawn at random, in [0, 1), got {explore}.")
    if power is not None:
        if not power > 0.0:
            raise ValueError(f"power is the exponent of the scores in the draw, above 0, got {power}.")
        if explore or strategy == "random":
            raise ValueError(
                f"power draws every text at random already: use it without "
                f"{'explore' if explore else 'the random strategy'}."
            )
    if density is not None and not (density > 0.0 and strategy != "random"):
        raise ValueError(
            f"density is the exponent of the texts' typicality in the ranking, above 0, with a "
            f"ranking strategy, got {density} with {strategy!r}."
        )
    output = Path(output)
    work, errors_path, record = Path(f"{output}.scores"), Path(f"{output}.errors.jsonl"), written_record(output)
    _check_outputs(input_path, input_format, output, errors_path)
    # OUT, OUT.errors.jsonl, OUT.select.json and OUT.scores/ may sit in the input folder: never read as
    # input (and the same sources as annotate's, for the resume check).
    mine = (output, errors_path, record)
    sources = input_sources(input_path, input_format, work, exclude=mine)
    settings = work / STATE_DIR / "settings.json"
    job = dataclasses.replace(job, entities_field=ENTITIES_FIELD, uncertainty=strategy, uncertainty_seed=seed)
    if settings.exists() and not _same_scoring(settings, job, shard_size, input_format, sources):
        shutil.rmtree(work)
    elif settings.exists() and (changed := changed_source(work, sources)) is not None:
        # Its scores came from other texts: resuming would rank rows by another text's score.
        warnings.warn(f"{changed.path} changed since {work} was scored: scoring the input again from the start.")
        shutil.rmtree(work)
    start = time.perf_counter()
    try:
        scored = annotate(
            job,
            input_path,
            work,
            input_format=input_format,
            shard_size=shard_size,
            progress=progress,
            exclude=mine,
        )
    except BaseException:
        # Nothing scored to resume from (e.g. the model did not load): the folder goes, if annotate made it.
        if (work / STATE_DIR).is_dir() and not any(work.glob("*.jsonl")):
            shutil.rmtree(work, ignore_errors=True)
        raise
    summary = SelectSummary(characters=scored.chars)
    typicality = None
    if density is not None:  # two passes over the texts scored (no model) before the ranking's
        typicality = Typicality(
            lambda: (
                record[job.text_field]
                for _, record in _scored_records(work, sources, shard_size)
                if "error" not in record
            )
        )
    factor = POOL_FACTOR
    while True:
        ranking = _rank(
            _scored_records(work, sources, shard_size),
            factor * n,
            factor * round(n * explore),
            job.text_field,
            typicality,
            density,
            power,
            seed,
        )
        guard = NearDuplicates(diversity, seed=seed) if diversity is not None else None
        summary.near_duplicates = 0

        def keep(candidate: Candidate) -> bool:
            if guard is not None and not guard.add(candidate.text):
                summary.near_duplicates += 1
                return False
            return True

        top, drawn = pick(ranking.ranked, ranking.reservoir, n, explore, keep)
        # Near-duplicates can leave fewer than n of the texts kept: keep more of them and pick again.
        if len(top) + len(drawn) >= n or ranking.complete:
            break
        factor *= POOL_FACTOR
    summary.texts, summary.errors = ranking.texts, len(ranking.errors)
    for candidate in drawn:
        candidate.drawn = True
    chosen = top + drawn
    summary.selected, summary.drawn = len(chosen), len(drawn)
    # Checked again: the files may have changed while the texts were scored.
    owned = _check_outputs(input_path, input_format, output, errors_path)
    output.parent.mkdir(parents=True, exist_ok=True)
    owned.write(output, selection_text(chosen, output_format, strategy, job.model, power, density).encode("utf8"))
    if ranking.errors:
        owned.write(errors_path, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in ranking.errors).encode())
    else:
        owned.remove(errors_path)  # an earlier run's, which select wrote (any other was refused above)
    shutil.rmtree(work)
    # The scoring's speed (annotate's, the pipeline's loading left out) over the rows scored now.
    summary.seconds = time.perf_counter() - start
    summary.scoring_seconds = scored.seconds - scored.load_seconds
    return summary


def written_record(output: Path) -> Path:
    """OUT.select.json: select's record of the files it wrote (OUT and OUT.errors.jsonl, by sha256)."""
    return Path(f"{output}.select.json")


def _check_outputs(input_path: str, input_format: str, output: Path, errors_path: Path) -> OwnedFiles:
    """Refuse an output that is a folder or lies below a file, an output that is an input file, and an
    existing output or errors file that select did not write (by OUT.select.json's record of what it
    wrote, never by what the file holds); the record of the files select may replace."""
    record = written_record(output)
    for name, path in (("output", output), ("errors file", errors_path), ("record", record)):
        target = path.resolve()
        if target.is_dir():
            raise ValueError(f"{name} {path} is a folder: name a file (.jsonl, or .json for Label Studio).")
        for folder in target.parents:
            if folder.exists() and not folder.is_dir():
                raise ValueError(f"{name} {path}: {folder} is a file, not a folder: name another output file.")
    if Path(input_path).is_file():
        for name, path in (("output", output), ("errors file", errors_path), ("record", record)):
            if path.resolve() == Path(input_path).resolve():
                raise ValueError(
                    f"{name} {path} is one of the input files (the input itself): selecting would overwrite it; "
                    "name another output file."
                )
    owned = OwnedFiles(record, "select")
    for name, path in (("output", output), ("errors file", errors_path)):
        if path.exists() and not owned.owns(path):
            if path.resolve() in {source.path.resolve() for source in find_sources(input_path, input_format)}:
                raise ValueError(
                    f"{name} {path} is one of the input files: selecting would overwrite it; name another output file."
                )
            raise ValueError(
                f"{name} {path} exists and select did not write it, or it changed since ({record.name} records "
                f"what select wrote): selecting would {'overwrite' if name == 'output' else 'overwrite or delete'} "
                "it; move it away or name another output file."
            )
    return owned


@dataclasses.dataclass
class Ranking:
    """One pass of select over the scored records."""

    ranked: List[Candidate]  # the best pool_size, best first
    reservoir: List[Candidate]  # explore's draw: a uniform sample of reservoir_size, shuffled
    errors: List[Dict[str, Any]]  # the bad rows' records
    texts: int  # the good rows
    complete: bool  # ranked and reservoir hold every good row: a larger pass would add nothing


def _rank(
    records: Iterable[Tuple[str, Dict[str, Any]]],
    pool_size: int,
    reservoir_size: int,
    text_field: str,
    typicality: Optional[Typicality],
    density: Optional[float],
    power: Optional[float],
    seed: int,
) -> Ranking:
    """The best pool_size candidates of records by score (times typicality ** density; power's key with
    power) in a min-heap, and a seeded uniform sample of reservoir_size (reservoir sampling): what select
    picks from, in memory bounded by the pool, not the input."""
    pool: List[Tuple[float, int, Candidate]] = []
    rng, reservoir, errors, texts = random.Random(seed), [], [], 0
    for order, (where, record) in enumerate(records):
        if "error" in record:
            errors.append(record)
            continue
        value = record.pop(ENTITIES_FIELD)
        entities = [(e["start"], e["end"], e["label"], e.get("score")) for e in value["entities"]]
        candidate = Candidate(value["uncertainty"], order, where, record, record[text_field], entities)
        key = candidate.score
        if typicality is not None:
            candidate.typicality = typicality(candidate.text)
            key *= candidate.typicality**density
        key = key if power is None else power_key(key, power, rng)
        item = (key, -order, candidate)
        if len(pool) < pool_size:
            heapq.heappush(pool, item)
        elif item[:2] > pool[0][:2]:
            heapq.heapreplace(pool, item)
        if len(reservoir) < reservoir_size:
            reservoir.append(candidate)
        elif reservoir_size and (j := rng.randrange(texts + 1)) < reservoir_size:
            reservoir[j] = candidate
        texts += 1
    ranked = [item[2] for item in sorted(pool, key=lambda item: (-item[0], -item[1]))]
    rng.shuffle(reservoir)
    complete = len(ranked) == texts and (reservoir_size == 0 or len(reservoir) == texts)
    return Ranking(ranked, reservoir, errors, texts, complete)


def _same_scoring(settings: Path, job: AnnotateJob, shard_size: int, input_format: str, sources: List[Source]) -> bool:
    """Whether OUTPUT.scores/ was scored as this run would score it (else it starts afresh)."""
    previous = read_state(settings)
    now = {
        "model_fingerprint": model_fingerprint(job.model),
        "uncertainty": job.uncertainty,
        "uncertainty_seed": job.uncertainty_seed,
        "shard_size": shard_size,
        "input_format": input_format,
        "text_field": job.text_field,
        "input": [str(source.path.resolve()) for source in sources],
    }
    return all(previous.get(key) == value for key, value in now.items())


def _scored_records(work: Path, sources: List[Source], shard_size: int) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """The records annotate wrote into work, in input order (its shards, as ShardWriter names them),
    each with its file and line."""
    shards = ShardWriter(work, "jsonl", shard_size)
    for source in sources:
        shard, index = 0, 0
        while shards.shard_path(source, shard).exists():
            with shards.shard_path(source, shard).open(encoding="utf8") as file:
                for line in file:
                    yield source.where(index), json.loads(line)
                    index += 1
            shard += 1


def selection_text(
    chosen: List[Candidate],
    output_format: str,
    strategy: str,
    model: str,
    power: Optional[float] = None,
    density: Optional[float] = None,
) -> str:
    """The chosen texts as output_format's records, best first (with power: in the draw's order), with the
    model's entities pre-filled.

    jsonl: the row's fields, "spans" ({start, end, label, text, score}: as Prodigy's) and "select"
    ({score, strategy, source, power where the texts were drawn, density and typicality where they
    ranked}); prodigy: "text", "spans", "meta";
    doccano: "text", "label" ([[start, end, label], ...]) and "select"; labelstudio: a JSON array of tasks
    whose "predictions" hold the entities (offsets in UTF-16 code units, as Label Studio counts them) with
    their scores.
    """
    records = [_record(c, output_format, strategy, model, power, density) for c in chosen]
    text = io.StringIO()
    write_json_records(records, text, array=output_format != "jsonl" and FORMATS[output_format].array)
    return text.getvalue()


def _record(
    candidate: Candidate,
    output_format: str,
    strategy: str,
    model: str,
    power: Optional[float],
    density: Optional[float] = None,
) -> Dict[str, Any]:
    """One chosen text as a record: select's own (jsonl) or the annotation tool's (its writer)."""
    info = {"score": candidate.score, "strategy": strategy, "source": candidate.where}
    if power is not None:
        info["power"] = power  # drawn with a probability proportional to score ** power
    if density is not None:  # ranked by score * typicality ** density
        info["density"], info["typicality"] = density, candidate.typicality
    if candidate.drawn:
        info["explore"] = True  # drawn at random, not taken from the top of the ranking
    item = AnnotatedText(candidate.text, candidate.entities, fields=candidate.fields, meta=info, model=str(model))
    if output_format == "jsonl":
        return {**candidate.fields, "spans": span_dicts(item), "select": info}
    return FORMATS[output_format].write(item)
