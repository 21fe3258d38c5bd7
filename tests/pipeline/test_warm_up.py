"""Issue 81: the first doc of a crf_ner pipeline with a lexicon took 1.5 s (the lexicon's prefix index, its
gazetteer types and the softword segmenter built on first use): `nlp.get_pipe("crf_ner").warm_up()` builds
them, so that a server's first request does not pay for it."""

import subprocess
import sys

import spacy
from spacy.training import Example

from conftest import REPO_ROOT

MODEL = {
    "@architectures": "spacy-cner.CRFTagger.v1",
    "tok2vec": {
        "@architectures": "spacy-cner.CharBigramEmbed.v1",
        "width": 16,
        "char_rows": 100,
        "bigram_rows": 100,
        "soft_lexicon": {"@layers": "spacy-cner.SoftLexicon.v1", "softword": True},
    },
    "encoder": None,
}


def test_warm_up_builds_what_the_first_doc_would(tmp_path):
    (tmp_path / "words.txt").write_text("张三 5 nr\n北京 9 ns\n工作 3 v\n", encoding="utf8")
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"model": MODEL})
    lexicon = {"@misc": "spacy-cner.lexicon.v1", "source": str(tmp_path / "words.txt")}
    nlp.config["initialize"]["components"] = {"crf_ner": {"lexicon": lexicon}}
    examples = [Example.from_dict(nlp.make_doc("张三在北京工作"), {"entities": [(0, 2, "PER"), (3, 5, "LOC")]})]
    nlp.initialize(lambda: examples)
    nlp.to_disk(tmp_path / "model")
    # A fresh interpreter: nothing built, rjieba (its dictionary loads at import) not imported yet.
    code = (
        "import sys, spacy\n"
        f"nlp = spacy.load({str(tmp_path / 'model')!r})\n"
        "pipe = nlp.get_pipe('crf_ner')\n"
        "lexicon = next(n for n in pipe.model.walk() if n.name == 'soft_lexicon').attrs['lexicon'].lexicon\n"
        "print(lexicon._prefixes is None, lexicon._types is None, 'rjieba' in sys.modules)\n"
        "pipe.warm_up()\n"
        "print(lexicon._prefixes is None, lexicon._types is None, 'rjieba' in sys.modules)\n"
        "print([(e.text, e.label_) for e in nlp('张三在北京工作').ents])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-3:-1] == ["True True False", "False False True"]
    assert lines[-1] == str([(e.text, e.label_) for e in spacy.load(tmp_path / "model")("张三在北京工作").ents])
