"""A trained pipeline's model card: what its labels mean, how well each is found, what it was trained on
and how fast it runs, written into its meta.json as the "notes" that `spacy package` puts in the
package's README (spacy.cli.package.generate_readme), with "sources" for the training data."""

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Set, Union

import spacy
import srsly
from spacy.tokens import DocBin

from ..corpus.labels import label_descriptions, spacy_meaning

# Written first into an --output copy: the files the copy holds, so that a later run replaces only
# a folder this command wrote (and a copy cut short can be written again).
COPY_MARKER = ".spacy_cner_model_card.json"


def write_model_card(
    model_path: Union[str, Path],
    *,
    source_name: Optional[str] = None,
    source_url: Optional[str] = None,
    source_license: Optional[str] = None,
    descriptions: Optional[Mapping[str, str]] = None,
    speed_corpus: Optional[Union[str, Path]] = None,
    output: Optional[Union[str, Path]] = None,
) -> Dict[str, Any]:
    """Add the model card to a saved pipeline's meta.json (and the given label descriptions to its
    crf_ner pipes' cfg, so that spacy.explain knows them wherever the pipeline is loaded).

    model_path (Union[str, Path]): The pipeline folder (e.g. training/resume/default/model-best).
    source_name, source_url, source_license (Optional[str]): The training data, added to meta["sources"].
    descriptions (Optional[Mapping[str, str]]): label -> meaning, over the known ones.
    speed_corpus (Optional[Union[str, Path]]): A .spacy file whose texts the pipeline tags once, in one
        process, for the card's characters a second (spaCy's training puts no speed in meta).
    output (Optional[Union[str, Path]]): Write the card into a copy of the pipeline there, leaving
        model_path as it is (a project's training output); None: in place. An existing folder must be
        empty or an earlier copy of this command's (whose files are then replaced); it must not be
        model_path, nor lie inside it or hold it.
    RETURNS (Dict[str, Any]): The new meta.
    """
    model_path = Path(model_path)
    meta_path = model_path / "meta.json"
    if not meta_path.exists():
        raise ValueError(
            f"{model_path} has no meta.json: expected a pipeline saved by spaCy (nlp.to_disk, spacy train)."
        )
    if output is not None:
        model_path = _copy_pipeline(model_path, Path(output))
        meta_path = model_path / "meta.json"
    nlp = spacy.load(model_path)
    meta = srsly.read_json(meta_path)
    pipes = [(name, pipe) for name, pipe in nlp.pipeline if type(pipe).__name__ == "CRFEntityRecognizer"]
    if not pipes:
        raise ValueError(f"{model_path} has no crf_ner component: the model card describes crf_ner's labels.")
    sections = []
    for name, pipe in pipes:
        # The user's meanings, then the dataset's (source_name, or recognised from the labels), then the pipe's
        # saved ones less those an older version took from spaCy's glossary by the label's name alone
        # (OntoNotes' LOC is not Resume's).
        # (The pipe's own meanings are in the glossary too once it is loaded: spacy_meaning leaves them out.)
        saved = {label: text for label, text in pipe.label_descriptions.items() if text != spacy_meaning(label)}
        known = {**saved, **label_descriptions(pipe.labels, descriptions, dataset=source_name)}
        if descriptions or known != pipe.label_descriptions:
            cfg_path = model_path / name / "cfg"
            cfg = srsly.read_json(cfg_path)
            cfg["label_descriptions"] = known
            srsly.write_json(cfg_path, cfg)
        sections.append(_label_table(name, pipe.labels, known, meta.get("performance", {}), len(pipes) > 1))
        sections.append(_probabilities(pipe))
    if source_name:
        source = {
            "name": source_name,
            **({"url": source_url} if source_url else {}),
            **({"license": source_license} if source_license else {}),
        }
        meta["sources"] = [s for s in meta.get("sources") or [] if s.get("name") != source_name] + [source]
    if speed_corpus is not None:
        sections.append(_speed(nlp, Path(speed_corpus)))
    meta["notes"] = "\n\n".join(sections)
    srsly.write_json(meta_path, meta)
    return meta


def _copy_pipeline(model_path: Path, output: Path) -> Path:
    """Copy the pipeline to output, which must be new, empty or this command's earlier copy: nothing
    else is deleted or overwritten. The marker, written before the files, lists them."""
    source, target = model_path.resolve(), output.resolve()
    if target == source or source in target.parents or target in source.parents:
        where = "is" if target == source else "lies inside" if source in target.parents else "holds"
        raise ValueError(f"output {output} {where} the pipeline's folder {model_path}: name a folder beside it.")
    for parent in [target, *target.parents]:
        if parent.exists() and not parent.is_dir():
            raise ValueError(f"output {output}: {parent} is a file, not a folder: name a folder for the copy.")
    files = _files(source)
    if target.exists():
        present = _files(target)
        marker = target / COPY_MARKER
        ours = set(srsly.read_json(marker).get("files", [])) if marker.is_file() else set()
        foreign = sorted(present - ours - {COPY_MARKER})
        if foreign:
            raise ValueError(
                f"output {output} holds files this command did not write ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}): name a new or empty folder."
            )
        for name in sorted(present & ours):  # this command's earlier copy: its files only
            (target / name).unlink()
    target.mkdir(parents=True, exist_ok=True)
    srsly.write_json(target / COPY_MARKER, {"source": str(source), "files": sorted(files - {COPY_MARKER})})
    shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(COPY_MARKER))
    return output


def _files(folder: Path) -> Set[str]:
    """Every file and link below folder, as paths relative to it (links not followed)."""
    return {
        (Path(root) / name).relative_to(folder).as_posix()
        for root, folders, names in os.walk(folder)
        for name in [*names, *(f for f in folders if (Path(root) / f).is_symlink())]
    }


def _label_table(
    name: str, labels: List[str], descriptions: Mapping[str, str], performance: Mapping[str, Any], named: bool
) -> str:
    """A Markdown table: each label, its meaning, and its dev precision, recall and F1 (meta's ents_per_type)."""
    per_type = performance.get("ents_per_type") or {}
    rows = ["| label | meaning | precision | recall | F1 |", "| --- | --- | ---: | ---: | ---: |"]
    for label in labels:
        scores = per_type.get(label) or {}
        figures = [
            f"{scores[k] * 100:.2f}" if isinstance(scores.get(k), (int, float)) else "n/a" for k in ("p", "r", "f")
        ]
        meaning = _cell(descriptions[label]) if label in descriptions else "n/a"
        rows.append(f"| {_code(label)} | {meaning} | " + " | ".join(figures) + " |")
    title = f"### Entity labels of {_code(name)}" if named else "### Entity labels"
    return f"{title}\n\nScores on the dev set the model was chosen on (spaCy's `ents_per_type`).\n\n" + "\n".join(rows)


def _code(text: str) -> str:
    """text as a Markdown code span that a table cell holds: one line, fenced by more backticks than it
    holds in a row, its pipes escaped (GitHub's tables split cells at a pipe even inside a code span)."""
    text = " ".join(str(text).splitlines()) or " "
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|")


def _cell(text: str) -> str:
    """Plain text for a Markdown table cell: one line, its backslashes, pipes and HTML's <, > and & escaped."""
    text = " ".join(str(text).splitlines())
    for char, escaped in (("\\", "\\\\"), ("|", "\\|"), ("&", "&amp;"), ("<", "&lt;"), (">", "&gt;")):
        text = text.replace(char, escaped)
    return text


def _probabilities(pipe: Any) -> str:
    """What the pipe's probabilities are and how doc.ents are decoded (as its entity_threshold says)."""
    threshold = pipe.entity_threshold
    if threshold is None:
        decoding = "the most probable tag sequence (Viterbi)"
        if pipe.ents_threshold == "auto" and pipe.cfg.get("threshold_chosen") is False:
            decoding += ", which scored at least as well on dev as the threshold fitted there"
    else:
        how = {"fitted": "fitted on dev", "auto": "fitted on dev, where it beat the best path"}.get(
            pipe.ents_threshold, "set in the config"
        )
        decoding = f"the spans at least {threshold:.3f} probable ({how}), most probable first, none overlapping"
    temperature = pipe.cfg.get("temperature", 1.0)
    scaled = f"temperature {temperature:.3f}, fitted on dev" if temperature != 1.0 else "no temperature fitted"
    return (
        f"### Entity probabilities\n\nEvery entity has its exact probability under the CRF in `ent._.score` "
        f"({scaled}); `doc.ents` are {decoding}."
    )


def _speed(nlp: Any, corpus: Path) -> str:
    """Characters a second over the corpus's texts: one pass of nlp.pipe, one process, this machine."""
    texts = [doc.text for doc in DocBin().from_disk(corpus).get_docs(nlp.vocab)]
    if not texts:
        raise ValueError(f"{corpus} holds no docs to measure the speed on.")
    start = time.perf_counter()
    for _ in nlp.pipe(texts, batch_size=256):
        pass
    seconds = time.perf_counter() - start
    characters = sum(len(text) for text in texts)
    return (
        f"### Speed\n\n{characters / seconds:,.0f} characters a second: {len(texts):,} texts of {corpus.name}, "
        "`nlp.pipe(batch_size=256)`, one process, on the machine that wrote this card."
    )
