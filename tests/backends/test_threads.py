"""torch's threads around a component's calls (backends/threads.py), and crf_ner, which predicts on its
torch_threads and gives the caller's count back (lac_tagger's: tests/pretrained/test_lac_pipeline.py)."""

import pytest
import spacy
import torch

from spacy_cner.backends.threads import check_threads, torch_threads
from toy_pipe import TEXTS, load_trained, predictions


@pytest.fixture
def two_threads():
    """The process on two of torch's threads for the test, as torch's default on a 2-core machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(previous)


def test_the_block_runs_on_the_threads_asked_and_the_callers_come_back(two_threads):
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with torch_threads(None):
        assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError, match="inside"):
        with torch_threads(1):
            raise RuntimeError("inside")
    assert torch.get_num_threads() == 2  # after an error too


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_thread_count_that_is_not_a_positive_int_is_refused_naming_its_owner(bad):
    assert check_threads(None, "x") is None and check_threads(3, "x") == 3
    with pytest.raises(ValueError, match="crf_ner: torch_threads must be a positive number"):
        check_threads(bad, "crf_ner")


def threads_seen_by(nlp, texts):
    """The torch thread counts crf_ner's model ran on while nlp tagged texts (its forward wrapped)."""
    seen = []
    model = nlp.get_pipe("crf_ner").model
    inner = model._func

    def forward(model, X, is_train):
        seen.append(torch.get_num_threads())
        return inner(model, X, is_train)

    model._func = forward
    docs = list(nlp.pipe(texts)) + [nlp(texts[0])]
    model._func = inner
    return seen, docs


def test_crf_ner_predicts_on_one_thread_by_default_and_gives_the_callers_back(two_threads, tmp_path):
    nlp = load_trained("BIOES")
    ner = nlp.get_pipe("crf_ner")
    assert ner.torch_threads == 1
    seen, docs = threads_seen_by(nlp, TEXTS)
    assert seen and set(seen) == {1} and torch.get_num_threads() == 2
    ner.torch_threads = None  # the process's setting
    seen_none, docs_none = threads_seen_by(nlp, TEXTS)
    assert set(seen_none) == {2}
    # The products are the same whatever the thread count (rowwise_ops): so are the entities and their scores.
    assert predictions(docs_none) == predictions(docs)
    ner.torch_threads = 3
    nlp.to_disk(tmp_path / "model")
    assert spacy.load(tmp_path / "model").get_pipe("crf_ner").torch_threads == 3
    with pytest.raises(ValueError, match="torch_threads must be a positive number"):
        ner.torch_threads = 0
    with pytest.raises(ValueError, match="torch_threads must be a positive number"):
        spacy.blank("zh").add_pipe("crf_ner", config={"torch_threads": 0})
