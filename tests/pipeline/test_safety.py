"""A tampered pipeline cannot run code at spacy.load, an altered one is refused naming its file;
report.html escapes labels and text."""

import io
import pickle

import re
import shutil

import pytest
import spacy
import srsly
import torch
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example
from conftest import small_config_pipeline

from spacy_cner.robustness.metrics import evaluate_robustness
from spacy_cner.robustness.report import render_report


class Payload:
    """Unpickling it creates the file `marker` (any code could run instead)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def tamper(model_file, marker) -> int:
    """Replace the torch weights of every shim in a saved thinc model by the payload; how many."""
    evil = io.BytesIO()
    torch.save(Payload(marker), evil)
    msg = srsly.msgpack_loads(model_file.read_bytes())
    n = 0
    for node_shims in msg["shims"]:
        for i, shim_bytes in enumerate(node_shims):
            shim = srsly.msgpack_loads(shim_bytes)
            if not shim.get("state"):
                continue
            if isinstance(shim["state"], bytes) and shim.get("config", {}).get("model_type"):
                shim["state"] = evil.getvalue()  # a Hugging Face transformer's weights
            else:
                inner = srsly.msgpack_loads(shim["state"])  # spacy-cner's rebuildable modules
                inner["state"] = evil.getvalue()
                shim["state"] = srsly.msgpack_dumps(inner)
            node_shims[i] = srsly.msgpack_dumps(shim)
            n += 1
    write_with_checksum(model_file, srsly.msgpack_dumps(msg))
    return n


def write_with_checksum(model_file, data: bytes) -> None:
    """Write tampered model bytes and the checksum that matches them into the cfg beside, as an
    attacker would: the checks below must hold without the checksum's help."""
    import hashlib

    model_file.write_bytes(data)
    cfg_path = model_file.parent / "cfg"
    srsly.write_json(cfg_path, {**srsly.read_json(cfg_path), "model_sha256": hashlib.sha256(data).hexdigest()})


@pytest.mark.parametrize("force_unsafe", [False, True])
@pytest.mark.parametrize("name", ["default", "bert_crf"])
def test_tampered_weights_are_refused(name, force_unsafe, request, tmp_path, monkeypatch):
    if force_unsafe:
        # torch.load's default runs pickled code with this set (and before torch 2.6).
        monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    small_config_pipeline(name, request).to_disk(tmp_path / "model")
    spacy.load(tmp_path / "model")  # untampered, it loads
    marker = tmp_path / "pwned"
    assert tamper(tmp_path / "model" / "crf_ner" / "model", marker) >= 1
    with pytest.raises(pickle.UnpicklingError, match="Refused to load saved weights"):
        spacy.load(tmp_path / "model")
    assert not marker.exists()


EVIL_LABEL = "<img src=x onerror=alert(1)>"


@Language.component("test_evil_label_ner")
def evil_label_ner(doc: Doc) -> Doc:
    """The first two characters are an entity whose label depends on the doc's length."""
    doc.ents = [Span(doc, 0, 2, label=EVIL_LABEL if len(doc) > 8 else "</p><b>bold</b>")]
    return doc


def test_report_escapes_labels_and_text():
    nlp = spacy.blank("zh")
    nlp.add_pipe("test_evil_label_ner")
    texts = ["<script>", "张三<i>x"]
    gold = [Example.from_dict(nlp.make_doc(t), {"entities": [(0, 2, "PER")]}).reference for t in texts]
    page = render_report(evaluate_robustness(nlp, gold), title="<title>model")
    assert "<img" not in page and "<script>" not in page and "<b>bold" not in page and "<i>x" not in page
    assert "<title>model" not in page.replace("<title>", "", 1)
    # (The text's first two characters are the entity, marked up on their own.)
    for text in (EVIL_LABEL, "</p><b>bold</b>", "<title>model", "cript>", "<i>x"):
        assert text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in page, text


def tamper_tokenizer(model_file, change) -> int:
    """Apply change(shim_msg) to every saved Hugging Face transformer shim of a thinc model file."""
    msg = srsly.msgpack_loads(model_file.read_bytes())
    n = 0
    for node_shims in msg["shims"]:
        for i, shim_bytes in enumerate(node_shims):
            shim = srsly.msgpack_loads(shim_bytes)
            if isinstance(shim, dict) and shim.get("config", {}).get("model_type"):
                change(shim)
                node_shims[i] = srsly.msgpack_dumps(shim)
                n += 1
    write_with_checksum(model_file, srsly.msgpack_dumps(msg))
    return n


def _remote_code(shim):
    shim["tokenizer"]["kwargs"] = {"use_fast": True, "trust_remote_code": True}
    shim["tokenizer"]["evil.py"] = b"open('pwned', 'w')\n"


def _escaping_file_name(shim):
    shim["tokenizer"]["../escaped.txt"] = b"written outside the temporary folder"


@pytest.mark.parametrize(
    "change,refusal", [(_remote_code, "trust_remote_code"), (_escaping_file_name, "not a plain file name")]
)
def test_tampered_tokenizer_files_are_refused(change, refusal, request, tmp_path, monkeypatch):
    """A saved transformer's tokenizer is rebuilt with from_pretrained from kwargs and files kept in
    crf_ner/model: settings that run shipped code, or file names leaving the temporary folder, are refused."""
    small_config_pipeline("bert_crf", request).to_disk(tmp_path / "model")
    spacy.load(tmp_path / "model")  # untampered, it loads
    assert tamper_tokenizer(tmp_path / "model" / "crf_ner" / "model", change) == 1
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=refusal):
        spacy.load(tmp_path / "model")
    assert not (tmp_path / "pwned").exists()
    assert not list(tmp_path.glob("**/escaped.txt")) and not list(tmp_path.parent.glob("escaped.txt"))


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_altered_or_truncated_weights_are_refused_naming_the_file(damage, request, tmp_path):
    """The cfg keeps the weights' sha256: a truncated file, or one byte changed (which may still
    unpack and predict garbage), fails at load with the file's name."""
    small_config_pipeline("default", request).to_disk(tmp_path / "model")
    model_file = tmp_path / "model" / "crf_ner" / "model"
    data = bytearray(model_file.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0x01
    model_file.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"{model_file} does not match the checksum"):
        spacy.load(tmp_path / "model")
    # Without the checksum (a pipeline saved before it existed), a truncated file still names itself.
    if damage == "truncate":
        cfg_path = model_file.parent / "cfg"
        srsly.write_json(cfg_path, {k: v for k, v in srsly.read_json(cfg_path).items() if k != "model_sha256"})
        with pytest.raises(ValueError, match=f"{model_file} cannot be read"):
            spacy.load(tmp_path / "model")


def test_altered_vectors_are_refused_naming_the_file(request, tmp_path):
    """The vocab's vectors (table, keys and rows) have their sha256 in crf_ner's cfg: 2,000 bit flips in
    vocab/vectors changed the entities with no error, and a changed key2row would too; now each fails
    at load naming the file. A pipeline saved before the checksum existed loads as before."""
    import numpy

    nlp = small_config_pipeline("default", request)
    assert nlp.vocab.vectors.shape[0] > 0  # the default config reads static vectors
    nlp.to_disk(tmp_path / "model")
    assert spacy.load(tmp_path / "model").get_pipe("crf_ner").cfg["vectors_sha256"] is not None
    vectors_file = tmp_path / "model" / "vocab" / "vectors"
    saved = vectors_file.read_bytes()
    data = numpy.frombuffer(saved, dtype=numpy.uint8).copy()
    header = len(saved) - nlp.vocab.vectors.data.nbytes  # .npy's header, left as it is
    rng = numpy.random.default_rng(0)
    for index in rng.integers(header, len(saved), size=2000):
        data[index] ^= numpy.uint8(1 << int(rng.integers(0, 8)))
    vectors_file.write_bytes(data.tobytes())
    with pytest.raises(ValueError, match=f"{vectors_file} does not match the checksum"):
        spacy.load(tmp_path / "model")
    vectors_file.write_bytes(saved)
    key2row = tmp_path / "model" / "vocab" / "key2row"
    rows = srsly.read_msgpack(key2row)
    first, second = list(rows)[:2]
    rows[first], rows[second] = rows[second], rows[first]
    srsly.write_msgpack(key2row, rows)
    with pytest.raises(ValueError, match=f"{vectors_file} does not match the checksum"):
        spacy.load(tmp_path / "model")
    cfg_path = tmp_path / "model" / "crf_ner" / "cfg"
    srsly.write_json(cfg_path, {k: v for k, v in srsly.read_json(cfg_path).items() if k != "vectors_sha256"})
    spacy.load(tmp_path / "model")  # saved before the checksum: trusted


@pytest.mark.parametrize("damage", ["vectors", "strings", "tokenizer"])
def test_spacys_own_files_name_themselves_when_they_cannot_be_read(damage, request, tmp_path):
    """A truncated vocab/vectors raised numpy's "Failed to read all data for array" and a damaged
    strings.json or tokenizer cfg srsly's "Expected object or value", naming no file (spaCy reads
    them): the error now names the file (the vocab folder for strings.json, which the vocab reads itself)."""
    small_config_pipeline("default", request).to_disk(tmp_path / "model")
    path, named = {
        "vectors": (tmp_path / "model" / "vocab" / "vectors", tmp_path / "model" / "vocab" / "vectors"),
        "strings": (tmp_path / "model" / "vocab" / "strings.json", tmp_path / "model" / "vocab"),
        "tokenizer": (tmp_path / "model" / "tokenizer" / "cfg", tmp_path / "model" / "tokenizer" / "cfg"),
    }[damage]
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(ValueError, match=f"^{named} cannot be read .*Restore the pipeline's files"):
        spacy.load(tmp_path / "model")


@pytest.fixture(scope="module")
def tiny_saved(tmp_path_factory):
    """A saved pipeline of a small crf_ner, initialized only."""
    nlp = spacy.blank("zh")
    nlp.add_pipe("crf_ner", config={"model": {"tok2vec": {"width": 8, "embed_width": 8}, "encoder": {"width": 8}}})
    nlp.initialize(lambda: [Example.from_dict(nlp.make_doc("张三去了上海"), {"entities": [(0, 2, "PER")]})])
    path = tmp_path_factory.mktemp("tiny") / "model"
    nlp.to_disk(path)
    return path


@pytest.mark.parametrize(
    "file, damage, said",
    [
        ("meta.json", lambda data: data[:40], "cannot be read .*Expected object or value"),
        ("meta.json", lambda data: b"[]", "cannot be read .*No valid 'lang' setting"),
        ("meta.json", lambda data: b"\xff\xfe{", "cannot be read .*UnicodeDecodeError"),
        ("config.cfg", lambda data: data[: data.index(b"[nlp]") + 3], "cannot be read .*ConfigValidationError"),
        ("config.cfg", lambda data: b"", r"is not a whole pipeline config \(\[E985\]"),
        ("config.cfg", lambda data: b"".join(data.splitlines(keepends=True)[:10]), "is not a whole pipeline config"),
        ("config.cfg", lambda data: data[: data.index(b"[components.")], r"is not a whole pipeline config \(\[E956\]"),
    ],
)
def test_spacys_meta_and_config_name_themselves_when_they_cannot_be_read(file, damage, said, tiny_saved, tmp_path):
    """Issue 85: a damaged meta.json raised srsly's "Expected object or value" and a truncated config.cfg
    thinc's "Source contains parsing errors: '<string>'" or a validation error, naming no file: one line
    now names the file and what to do."""
    shutil.copytree(tiny_saved, tmp_path / "model")
    path = tmp_path / "model" / file
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError) as caught:
        spacy.load(tmp_path / "model")
    assert re.match(f"^{re.escape(str(path))} {said}.*Restore the pipeline's files", str(caught.value))
    assert "\n" not in str(caught.value)


def test_a_bad_config_override_is_not_called_a_damaged_file(tiny_saved):
    """The caller's own override that does not fit keeps spaCy's error: the file is not blamed."""
    with pytest.raises(ValueError) as caught:
        spacy.load(tiny_saved, config={"nlp": {"tokenizer": {"@tokenizers": "no.such.tokenizer"}}})
    assert "config.cfg" not in str(caught.value) and "Restore" not in str(caught.value)


def test_errors_that_are_no_damaged_file_pass_through_as_they_are(tmp_path, monkeypatch):
    """Only the errors a damaged file gives are called one: an ImportError or OSError in a reader (a missing
    package, a model hub's refusal) keeps its type, attributes and message."""
    import spacy.util

    from spacy_cner.pipeline import file_errors

    file_errors.name_files_in_load_errors()
    (tmp_path / "x").write_text("{}", encoding="utf8")

    def missing_package(path):
        raise ModuleNotFoundError("No module named 'foo'", name="foo")

    with pytest.raises(ModuleNotFoundError) as caught:
        spacy.util.from_disk(tmp_path, {"x": missing_package}, [])
    assert caught.value.name == "foo" and "cannot be read" not in str(caught.value)

    def damaged(path):
        raise ValueError("Expected object or value")

    with pytest.raises(ValueError, match="x cannot be read .*Expected object or value"):
        spacy.util.from_disk(tmp_path, {"x": damaged}, [])
