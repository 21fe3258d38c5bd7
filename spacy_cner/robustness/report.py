"""An HTML report of sentence-level robustness: summary, per-type chart, changed examples with displaCy."""

import html
from typing import Dict, List, Sequence

from spacy import displacy

from .metrics import Entity, RobustnessScores, join_entities

# displaCy colours: a changed entity stands out (and is marked); the others have their label's colour
# (spacy_cner/displacy_colours.py, spaCy's for its own labels).
CHANGED_COLOUR = "#ff6b6b"
CHANGED_MARK = " ✱"
# Shown where the two sentences of a joined sample meet (display only: not in the text scored).
JOINT_MARK = "⏐"
METRICS = (("standard", "S-F1"), ("perturbed", "P-F1"), ("robust", "R-F1"))
DEFINITIONS = (
    ("S-F1", "the model's entities on each test sentence alone, against the gold entities."),
    (
        "P-F1",
        "the model's entities on the joined samples (sentence i, then sentence j, nothing between), "
        "against the gold entities of both sentences.",
    ),
    (
        "R-F1",
        "the model's entities on the joined samples against its own entities on the two sentences "
        "alone: 100 when a neighbouring sentence never changes an answer.",
    ),
    (
        "Asr",
        "attack success rate: the share of the joined samples' characters whose predicted tag "
        "differs from the tag predicted on the sentence alone.",
    ),
)


def render_report(scores: RobustnessScores, title: str, max_examples: int = 200) -> str:
    """The whole report as one HTML page (displaCy markup inline, no external files).

    scores (RobustnessScores): From evaluate_robustness (with .inputs).
    title (str): Page title, e.g. the model's name.
    max_examples (int): Most changed samples rendered; the count of the rest is given.
    RETURNS (str): The HTML.
    """
    inputs = scores.inputs
    by_sample: Dict[int, List] = {}
    for changed in scores.changed:
        by_sample.setdefault(changed.sample, []).append(changed)
    samples = sorted(by_sample)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}th:first-child,td:first-child"
        "{text-align:left}.example{border-top:1px solid #ccc;margin-top:1.5em}.label{color:#555}</style>",
        "</head><body>",
        f"<h1>Sentence-level robustness: {html.escape(title)}</h1>",
        _summary_table(scores),
        "<dl class='definitions'>"
        + "".join(f"<dt>{name}</dt><dd>{html.escape(text)}</dd>" for name, text in DEFINITIONS)
        + "</dl>",
        "<h2>F1 per entity type</h2>",
        _chart(scores),
        f"<h2 id='changed'>Changed examples ({len(samples)} of {len(inputs.get('pairs', []))} joined samples)</h2>",
        f"<p>Entities the neighbouring sentence made appear, disappear or change label are marked "
        f"{html.escape(CHANGED_MARK.strip())} and red; {JOINT_MARK} marks where the two sentences meet "
        "(it is not part of the text the model saw).</p>",
    ]
    for sample in samples[:max_examples]:
        parts.append(_example(inputs, sample, by_sample[sample]))
    if len(samples) > max_examples:
        parts.append(f"<p>{len(samples) - max_examples} more changed samples are in metrics.json.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _summary_table(scores: RobustnessScores) -> str:
    rows = ["<table class='summary'><tr><th>metric</th><th>P</th><th>R</th><th>F1</th></tr>"]
    for name, heading in METRICS:
        prf = getattr(scores, name)
        rows.append(
            f"<tr><td>{heading}</td><td>{prf.p * 100:.2f}</td><td>{prf.r * 100:.2f}</td><td>{prf.f * 100:.2f}</td></tr>"
        )
    rows.append(
        f"<tr><td>Asr (changed characters)</td><td colspan='3'>{scores.attack_success_rate * 100:.3f}% "
        f"({scores.n_changed_chars} of {scores.n_chars})</td></tr></table>"
    )
    return "".join(rows)


def _chart(scores: RobustnessScores) -> str:
    """Horizontal bars of S-, P- and R-F1 per entity type, as inline SVG."""
    labels = sorted(scores.per_type)
    colours = {"standard": "#4c72b0", "perturbed": "#dd8452", "robust": "#55a868"}
    bar, gap, left, scale = 10, 8, 90, 4.0
    height = len(labels) * (3 * bar + gap) + 30
    svg = [
        f"<svg class='chart' width='{left + 100 * scale + 60}' height='{height}' xmlns='http://www.w3.org/2000/svg'>"
    ]
    y = 20
    for label in labels:
        svg.append(f"<text x='0' y='{y + 2 * bar}' font-size='12'>{html.escape(label)}</text>")
        for name, heading in METRICS:
            prf = scores.per_type[label].get(name)
            if prf is None or not (prf.n_predicted or prf.n_reference):
                # Nothing to score: R-F1 of a label the model never predicts (metrics.json has no value).
                svg.append(f"<text x='{left + 4}' y='{y + bar - 2}' font-size='9'>{heading} n/a</text>")
                y += bar
                continue
            f1 = prf.f * 100
            svg.append(
                f"<rect x='{left}' y='{y}' width='{f1 * scale:.1f}' height='{bar - 1}' fill='{colours[name]}'>"
                f"<title>{html.escape(label)} {heading} {f1:.2f}</title></rect>"
            )
            svg.append(
                f"<text x='{left + f1 * scale + 4:.1f}' y='{y + bar - 2}' font-size='9'>{heading} {f1:.1f}</text>"
            )
            y += bar
        y += gap
    svg.append("</svg>")
    return "".join(svg)


def _example(inputs: Dict[str, list], sample: int, changed: List) -> str:
    """One joined sample: the sentences alone vs in context, changed entities marked."""
    i, j = inputs["pairs"][sample]
    texts = inputs["texts"]
    offset = len(texts[i])
    text = texts[i] + texts[j]
    alone = join_entities(inputs["alone"][i], inputs["alone"][j], offset)
    # A changed entity's offsets are within its sentence (i first, j second; i != j).
    changed_spans = {
        (c.start + (0 if c.sentence == i else offset), c.end + (0 if c.sentence == i else offset)) for c in changed
    }
    descriptions = "; ".join(
        f"{html.escape(c.text)}: {html.escape(c.before or 'none')} → {html.escape(c.after or 'none')}" for c in changed
    )
    gold = join_entities(inputs["gold"][i], inputs["gold"][j], offset) if "gold" in inputs else None
    gold_part = "" if gold is None else f"<p class='label'>Gold</p>{_render(text, gold, set(), offset)}"
    return (
        f"<div class='example' id='sample-{sample}'><p class='label'>Sentences {i} + {j}: {descriptions}</p>"
        f"{gold_part}"
        f"<p class='label'>Alone</p>{_render(text, alone, changed_spans, offset)}"
        f"<p class='label'>In context</p>{_render(text, inputs['in_context'][sample], changed_spans, offset)}</div>"
    )


def _render(text: str, entities: Sequence[Entity], changed_spans: set, joint: int) -> str:
    """displaCy's entity markup, JOINT_MARK inserted at character joint (offsets after it
    shift by one); displaCy escapes the text but not the labels."""
    ents = []
    colours = {}
    text = text[:joint] + JOINT_MARK + text[joint:]
    for start, end, label in sorted(entities):
        changed = (start, end) in changed_spans
        start, end = start + (start >= joint), end + (end > joint)
        label = html.escape(label)
        if changed:
            label = label + CHANGED_MARK
            colours[label] = CHANGED_COLOUR
        ents.append({"start": start, "end": end, "label": label})
    doc = {"text": text, "ents": ents, "title": None}
    return displacy.render(doc, style="ent", manual=True, page=False, jupyter=False, options={"colors": colours})
