"""A tiny crf_ner pipe overfit to the toy corpus (conftest.TRAIN_DATA), shared by the pipe's tests: built
once per scheme, copied for each test."""

import os
import signal
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Tuple

import spacy
from spacy.training import Example
from thinc.api import fix_random_seed

from conftest import make_examples

SMALL_MODEL = {
    "@architectures": "spacy-cner.CRFTagger.v1",
    "tok2vec": {
        "@architectures": "spacy-cner.CharBigramEmbed.v1",
        "width": 32,
        "char_rows": 500,
        "bigram_rows": 1000,
        "bigram_dropout": 0.0,
    },
    # Explicit dropout: add_pipe merges unset keys from the factory default (0.5).
    "encoder": {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 32, "dropout": 0.0},
}
LABELS = ("LOC", "ORG", "PER")  # the toy corpus's
# Texts to compare predictions on: training sentences, new ones, empty and
# whitespace-only docs, and whitespace inside a text.
TEXTS = [
    "我在北京市工作",
    "",
    "张三去了上海",
    "   ",
    "李四是阿里巴巴的员工",
    "\n",
    "王五在深圳工作",
    "腾讯 和  阿里巴巴\n张三",
]
N_TRAIN_STEPS = 40


def make_nlp(scheme: str = "BIOES") -> spacy.Language:
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config=pipe_config(scheme))
    return nlp


def pipe_config(scheme: str) -> Dict:
    return {"model": SMALL_MODEL, "scheme": scheme}


def train(nlp: spacy.Language, examples: List[Example], n_steps: int = N_TRAIN_STEPS) -> List[float]:
    """Initialize from the examples and update on all of them n_steps times; the losses."""
    optimizer = nlp.initialize(get_examples=lambda: examples)
    history = []
    for _ in range(n_steps):
        losses: Dict[str, float] = {}
        nlp.update(examples, sgd=optimizer, losses=losses)
        history.append(losses["crf_ner"])
    return history


@lru_cache(maxsize=None)
def trained_bytes(scheme: str) -> Tuple[bytes, Tuple[float, ...]]:
    """A pipeline overfit to TRAIN_DATA (built once per scheme) and its training losses."""
    fix_random_seed(0)
    nlp = make_nlp(scheme)
    losses = train(nlp, make_examples(nlp))
    return nlp.to_bytes(), tuple(losses)


def load_trained(scheme: str = "BIOES") -> spacy.Language:
    """A fresh copy of the trained pipeline, safe to modify."""
    nlp = make_nlp(scheme)
    return nlp.from_bytes(trained_bytes(scheme)[0])


def predictions(docs) -> List[Dict]:
    """Everything crf_ner sets, in a comparable form (scores to 5 decimals)."""
    return [
        {
            "ents": [(ent.start, ent.end, ent.label_) for ent in doc.ents],
            "iob": [token.ent_iob_ for token in doc],
            "types": [token.ent_type_ for token in doc],
            "spans": [
                (span.start, span.end, span.label_, round(float(score), 5))
                for span, score in zip(
                    doc.spans.get("crf_ner", []), doc.spans["crf_ner"].attrs["scores"] if "crf_ner" in doc.spans else []
                )
            ],
        }
        for doc in docs
    ]


def run_python(script: str, cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    """Run a script in a fresh interpreter; on timeout kill its whole process group."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=str(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    finally:
        # Workers a hung multiprocessing pipe left behind share the group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


# Held-out examples the overfit model partly gets wrong.
HELD_OUT = [
    ("张三在深圳工作", [(0, 2, "PER"), (3, 5, "LOC")]),
    ("李四去了北京", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("阿里巴巴总部在杭州", [(0, 4, "ORG"), (7, 9, "LOC")]),
    ("王五是腾讯的员工", [(0, 2, "PER"), (3, 5, "ORG")]),
]


def scored(doc, key="crf_ner"):
    """A doc's span group as (start, end, label) -> probability."""
    return {(s.start, s.end, s.label_): float(p) for s, p in zip(doc.spans[key], doc.spans[key].attrs["scores"])}
