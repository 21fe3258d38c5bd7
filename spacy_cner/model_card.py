"""A trained pipeline's model card: what its labels mean, how well each is found, what it was trained on
and how fast it ran, written into its meta.json as the "notes" that `spacy package` puts in the
package's README (spacy.cli.package.generate_readme), with "sources" for the training data."""
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

import spacy
import srsly

from .labels import label_descriptions


def write_model_card(
    model_path: Union[str, Path],
    *,
    source_name: Optional[str] = None,
    source_url: Optional[str] = None,
    source_license: Optional[str] = None,
    descriptions: Optional[Mapping[str, str]] = None,
) -> Dict[str, Any]:
    """Add the model card to a saved pipeline's meta.json (and the given label descriptions to its
    crf_ner pipes' cfg, so that spacy.explain knows them wherever the pipeline is loaded).

    model_path (Union[str, Path]): The pipeline folder (e.g. training/resume/default/model-best).
    source_name, source_url, source_license (Optional[str]): The training data, added to meta["sources"].
    descriptions (Optional[Mapping[str, str]]): label -> meaning, over the known ones.
    RETURNS (Dict[str, Any]): The new meta.
    """
    model_path = Path(model_path)
    meta_path = model_path / "meta.json"
    if not meta_path.exists():
        raise ValueError(f"{model_path} has no meta.json: expected a pipeline saved by spaCy (nlp.to_disk, spacy train).")
    nlp = spacy.load(model_path)
    meta = srsly.read_json(meta_path)
    pipes = [(name, pipe) for name, pipe in nlp.pipeline if type(pipe).__name__ == "CRFEntityRecognizer"]
    if not pipes:
        raise ValueError(f"{model_path} has no crf_ner component: the model card describes crf_ner's labels.")
    sections = []
    for name, pipe in pipes:
        known = label_descriptions(pipe.labels, {**pipe.label_descriptions, **dict(descriptions or {})})
        if descriptions:
            cfg_path = model_path / name / "cfg"
            cfg = srsly.read_json(cfg_path)
            cfg["label_descriptions"] = known
            srsly.write_json(cfg_path, cfg)
        sections.append(_label_table(name, pipe.labels, known, meta.get("performance", {}), len(pipes) > 1))
        sections.append(_probabilities(pipe))
    if source_name:
        source = {"name": source_name, **({"url": source_url} if source_url else {}),
                  **({"license": source_license} if source_license else {})}
        meta["sources"] = [s for s in meta.get("sources") or [] if s.get("name") != source_name] + [source]
    speed = meta.get("performance", {}).get("speed")
    if speed:
        sections.append(f"### Speed\n\n{speed:,.0f} words a second in the training run's last evaluation "
                        "(spaCy's `speed` score, on the training machine; a word is a character in a blank `zh` "
                        "pipeline). BENCHMARKS.md of spacy-cner compares it with spaCy's `ner` side by side.")
    meta["notes"] = "\n\n".join(sections)
    srsly.write_json(meta_path, meta)
    return meta


def _label_table(name: str, labels: List[str], descriptions: Mapping[str, str], performance: Mapping[str, Any],
                 named: bool) -> str:
    """A Markdown table: each label, its meaning, and its dev precision, recall and F1 (meta's ents_per_type)."""
    per_type = performance.get("ents_per_type") or {}
    rows = ["| label | meaning | precision | recall | F1 |", "| --- | --- | ---: | ---: | ---: |"]
    for label in labels:
        scores = per_type.get(label) or {}
        figures = [f"{scores[k] * 100:.2f}" if isinstance(scores.get(k), (int, float)) else "n/a" for k in ("p", "r", "f")]
        rows.append(f"| `{label}` | {descriptions.get(label, 'n/a')} | " + " | ".join(figures) + " |")
    title = f"### Entity labels of `{name}`" if named else "### Entity labels"
    return f"{title}\n\nScores on the dev set the model was chosen on (spaCy's `ents_per_type`).\n\n" + "\n".join(rows)


def _probabilities(pipe: Any) -> str:
    """What the pipe's probabilities are and how doc.ents are decoded."""
    threshold = pipe.cfg.get("fitted_threshold")
    decoding = (f"the spans at least {threshold:.3f} probable (fitted on dev)" if threshold is not None
                else "the most probable tag sequence (Viterbi)")
    return (f"### Entity probabilities\n\nEvery entity has its exact probability under the CRF in `ent._.score` "
            f"(temperature {pipe.cfg.get('temperature', 1.0):.3f}, fitted on dev); `doc.ents` are {decoding}.")
