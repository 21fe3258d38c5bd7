"""`distill`: the teacher pass (annotate's engine over the train split's texts and the unlabeled texts,
resumable), then the student trained on the soft targets by spaCy's own loop (model-best on dev F1); the
checks it makes before (no held-out text among the unlabeled ones) and after (model-best not the untrained
student)."""

import dataclasses
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import srsly
from spacy.tokens import DocBin
from spacy.vocab import Vocab
from wasabi import msg

from ...annotate.job import AnnotateJob
from ...tags import TagSet
from .teacher import TEACHER_INPUTS, TEACHER_PIPELINE, TEACHER_SHARDS, prepare_teacher, write_teacher_inputs


@dataclasses.dataclass
class DistillSummary:
    """What a distill run did: the teacher pass (annotate's Summary) and where the student is."""

    teacher: Any  # annotate.Summary
    student: Optional[Path]  # OUTPUT/model-best, None when training was not run
    config: Path  # the student's config as trained


def distill(
    job: AnnotateJob,
    student_config: Path,
    output: Path,
    *,
    train: Path,
    dev: Path,
    test: Optional[Path] = None,
    texts: Sequence[Any] = (),
    temperature: float = 2.0,
    gold_weight: float = 0.5,
    augment: int = 0,
    max_steps: Optional[int] = None,
    shard_size: int = 10_000,
    overrides: Optional[Dict[str, Any]] = None,
    progress: bool = True,
    train_student: bool = True,
) -> DistillSummary:
    """The teacher's soft targets on the train split's texts and the unlabeled texts (annotate's engine,
    resumable: cached in OUTPUT/teacher/), then the student trained on them by spaCy's training loop
    (OUTPUT/model-best on dev F1, OUTPUT/model-last).

    job (AnnotateJob): The teacher (job.model: a trained pipeline, name or path, with a crf_ner) and the
        settings its pass runs with, as annotate takes them (engine, batch_size, n_process, gpu_id,
        address, workers, gpus_per_worker); the pass reads the "text" field and writes its own records, so
        text_field, entities_field and uncertainty keep their defaults. The local engine's gpu_id trains
        the student too.
    student_config (Path): The student's training config (e.g. configs/student.cfg), with one crf_ner.
    output (Path): The output folder.
    train (Path): The train split (.spacy): its texts get soft targets, its gold docs the gold loss.
    dev (Path): The dev split (.spacy): model-best is chosen on it.
    test (Optional[Path]): The test split (.spacy), if any: texts may not hold its texts either.
    texts (Sequence[Path]): Unlabeled text: files, folders or globs as annotate reads them (a .txt with one
        text per line, .jsonl, .parquet, .csv, .tsv); "" is left out. Never a split that will be scored:
        texts found in dev (or test) are refused (check_unlabeled_texts).
    temperature (float): The teacher's and the student's CRF scores are divided by it in the loss: the
        softer targets carry more of the teacher's second choices (BENCHMARKS.md compares 2.0 with 1.0).
    gold_weight (float): The gold negative log-likelihood's weight beside the KL.
    augment (int): Copies of each train doc with its entities replaced by other mentions of their labels
        (mention_replaced_texts) that the teacher labels too, beside texts (0: none).
    max_steps (Optional[int]): Stop training after this many steps (None: the config's).
    shard_size (int): The teacher pass's texts per cached shard, as annotate takes it.
    overrides (Optional[Dict[str, Any]]): More config overrides for the student's training.
    progress (bool): A progress bar over the teacher pass (its total counted first).
    train_student (bool): False: the teacher pass only.
    RETURNS (DistillSummary): What was done.
    """
    from spacy.cli.train import train as spacy_train
    from spacy.util import load_config

    from ...annotate import annotate

    check_teacher_job(job)
    output = Path(output)
    folder = output / "teacher"
    held_out = [("dev", dev)] + ([("test", test)] if test is not None else [])
    check_unlabeled_texts(texts, held_out)
    tags = prepare_teacher(job.model, folder, temperature)
    write_teacher_inputs(folder / TEACHER_INPUTS, train, texts, augment, dev, test)
    summary = annotate(
        dataclasses.replace(job, model=str(folder / TEACHER_PIPELINE)),
        str(folder / TEACHER_INPUTS),
        folder / TEACHER_SHARDS,
        output_format="spacy",
        shard_size=shard_size,
        progress=progress,
    )
    config = load_config(student_config)
    name = _crf_ner_name(config, student_config)
    component = config["components"][name]
    for setting in ("join_examples", "replace_mentions"):  # new docs would lose their soft targets
        if component.get(setting):
            component[setting] = 0.0
    config["corpora"]["train"] = {
        "@readers": "spacy-cner.distill_corpus.v1",
        "path": str(folder),
        "gold": "${paths.train}",
        "gold_weight": gold_weight,
    }
    # The teacher's labels in its order and its scheme: the student's tags are the teacher's.
    tag_set = TagSet.from_names(tags)
    component["scheme"] = tag_set.scheme
    config["initialize"].setdefault("components", {}).setdefault(name, {})["labels"] = list(tag_set.labels)
    config_path = output / "student.cfg"
    config.to_disk(config_path)
    if not train_student:
        return DistillSummary(summary, None, config_path)
    settings = {"paths.train": str(train), "paths.dev": str(dev), **(overrides or {})}
    if max_steps is not None:
        settings["training.max_steps"] = max_steps
        settings.update(evaluation_within(config, settings, max_steps))
    spacy_train(config_path, output, use_gpu=job.gpu_id if job.engine == "local" else -1, overrides=settings)
    warn_if_untrained_best(output)
    return DistillSummary(summary, output / "model-best", config_path)


def check_teacher_job(job: AnnotateJob) -> None:
    """Refuse a teacher-pass job with settings the pass would not use (it reads the "text" field of the
    inputs it writes and stores soft targets, not entities), naming them."""
    defaults = AnnotateJob(job.model)
    unused = [
        f"{name}={getattr(job, name)!r}"
        for name in ("text_field", "entities_field", "uncertainty", "uncertainty_seed")
        if getattr(job, name) != getattr(defaults, name)
    ]
    if unused:
        raise ValueError(
            f"distill's teacher pass does not use {', '.join(unused)}: it reads the 'text' field of the inputs "
            "it writes and stores soft targets. Leave them at AnnotateJob's defaults."
        )


def evaluation_within(config: Any, settings: Dict[str, Any], max_steps: int) -> Dict[str, Any]:
    """The override that evaluates the student at its last step when max_steps comes before the
    config's first evaluation after step 0: spaCy's loop evaluates at step 0 and every eval_frequency
    steps, so otherwise the only checkpoint scored is the untrained student and model-best is it."""
    every = int(settings.get("training.eval_frequency", config["training"].get("eval_frequency", 200)))
    if max_steps <= 0 or max_steps >= every:
        return {}
    msg.info(
        f"distill: --max-steps {max_steps} before the config's eval_frequency {every}: evaluating at step {max_steps}"
    )
    return {"training.eval_frequency": max_steps}


def warn_if_untrained_best(output: Path) -> None:
    """Warn when model-best is the student at step 0 (no later evaluation scored higher), read from the
    training curve that spacy-cner.PlotLogger.v1 writes (a config with another logger is not checked)."""
    curve = output / "training_curve.jsonl"
    if not curve.exists():
        return
    rows = [row for row in srsly.read_jsonl(curve) if row.get("score") is not None]
    if not rows:
        return
    # spaCy's loop copies model-last to model-best at every evaluation scoring at least the best so far.
    best = max(rows, key=lambda row: (row["score"], row["step"]))
    if best["step"] == 0:
        msg.warn(
            f"distill: {output / 'model-best'} is the untrained student of step 0: no later evaluation "
            f"on dev scored above its {best['score']:.3f} (last step {rows[-1]['step']}). Train longer "
            f"(--max-steps) or use {output / 'model-last'}."
        )


def check_unlabeled_texts(texts: Sequence[Any], splits: Sequence[Tuple[str, Path]]) -> None:
    """Refuse unlabeled texts that are texts of a held-out split (dev, test), naming how many and where:
    the student would learn the teacher's answers on the texts it is chosen (or scored) on. Texts are
    compared with their surrounding whitespace left out; one pass over the texts, as annotate reads them.

    texts (Sequence[Any]): Files, folders or globs, as distill's texts ("" is left out).
    splits (Sequence[Tuple[str, Path]]): (name, .spacy file) of each held-out split.
    """
    from ...annotate.inputs import find_sources, read_rows

    vocab = Vocab()
    held_out: Dict[str, str] = {}
    for name, path in splits:
        for doc in DocBin().from_disk(path).get_docs(vocab):
            held_out.setdefault(doc.text.strip(), f"{name} ({path})")
    held_out.pop("", None)
    found: Dict[Tuple[str, str], List[Any]] = {}  # (file, split) -> [count, first "file, line N"]
    for text in texts:
        for source in find_sources(str(text)) if str(text) else ():
            for index, row in enumerate(read_rows(source, "entities")):
                split = held_out.get(row.text.strip()) if row.error is None else None
                if split is not None:
                    entry = found.setdefault((str(source.path), split), [0, source.where(index)])
                    entry[0] += 1
    if found:
        total = sum(count for count, _ in found.values())
        where = "; ".join(
            f"{count} in {path} of {split}, the first at {first.rsplit(', ', 1)[1]}"
            for (path, split), (count, first) in found.items()
        )
        raise ValueError(
            f"--text holds {total} texts of the held-out splits ({where}): the student would learn the teacher's "
            "answers on the texts it is chosen or scored on. Remove them from the unlabeled text."
        )


def _crf_ner_name(config: Any, path: Path) -> str:
    names = [name for name, block in config["components"].items() if block.get("factory") == "crf_ner"]
    if len(names) != 1:
        raise ValueError(f"The student config {path} must have one crf_ner component, it has {len(names)}.")
    return names[0]
