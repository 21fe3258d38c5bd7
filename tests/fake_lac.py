"""A fabricated LAC sdist with a tiny tagger, for the layers and configs that read LAC's network
(spacy-cner.LacFeatures.v1, configs/lac_context.cfg): the files pretrained/lac.py reads, laid out as
LAC-2.1.2.tar.gz, random weights (seeded), and the patches that make open_lac accept it (its hash, the sizes)."""

import contextlib
import hashlib
import io
import tarfile
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import numpy

# A space first (as LAC's id 0), the toy corpus's characters, a few words, OOV last.
CHARACTERS = "我在北京市工作张三去了上海李四是阿里巴巴的员工王五住广州腾讯总部深圳，。！？；中国人民银行首都爱万"
WORDS = ["北京", "北京市", "上海", "张三", "阿里巴巴", "中国", "工作", "首都"]
VOCAB = [" "] + list(dict.fromkeys(CHARACTERS)) + WORDS + ["OOV"]
# The dictionary segmenter's words (去了 is not in VOCAB: one id per character).
SEGMENT_WORDS = {"北京": 10, "北京市": 3, "上海": 8, "张三": 5, "阿里巴巴": 4, "中国": 9, "工作": 6, "去了": 2}
WIDTH, HIDDEN, TAGS = 4, 3, 49


def network_tensors(seed: int = 0) -> dict:
    """The tagger's tensor files (pretrained/lac.py network_shapes) in tiny sizes."""
    rng = numpy.random.default_rng(seed)
    tensors = {"word_emb": rng.normal(0, 1, (len(VOCAB), WIDTH))}
    for index in range(4):
        tensors[f"fc_{index}.w_0"] = rng.normal(0, 0.5, (WIDTH if index < 2 else 2 * HIDDEN, 3 * HIDDEN))
        tensors[f"fc_{index}.b_0"] = rng.normal(0, 0.1, (3 * HIDDEN,))
        tensors[f"gru_{index}.w_0"] = rng.normal(0, 0.5, (HIDDEN, 3 * HIDDEN))
        tensors[f"gru_{index}.b_0"] = rng.normal(0, 0.1, (1, 3 * HIDDEN))
    tensors["fc_4.w_0"] = rng.normal(0, 0.5, (2 * HIDDEN, TAGS))
    tensors["fc_4.b_0"] = rng.normal(0, 0.1, (TAGS,))
    tensors["crfw"] = rng.normal(0, 0.5, (TAGS + 2, TAGS))
    return {name: value.astype("float32") for name, value in tensors.items()}


def write_fake_lac(path: Path, seed: int = 0) -> Path:
    """A tarball with the tagger's files: word.dic, q2b.dic, tag.dic, small_seg.dic and its tensors."""
    from spacy_cner.pretrained.paddle_tensor import write_tensor

    files = {
        "lac_model/conf/word.dic": "".join(f"{i}\t{token}\n" for i, token in enumerate(VOCAB)),
        "lac_model/conf/q2b.dic": "萬\t万\n１\t1\n",
        "lac_model/conf/tag.dic": "".join(f"{i}\ttag{i}-{'BI'[i % 2]}\n" for i in range(TAGS - 1)) + f"{TAGS - 1}\tO\n",
        "lac_model/conf/small_seg.dic": "".join(f"{word} {count}\n" for word, count in SEGMENT_WORDS.items()),
    }
    data = {name: text.encode("utf8") for name, text in files.items()}
    data.update({f"lac_model/model/{name}": write_tensor(value) for name, value in network_tensors(seed).items()})
    with tarfile.open(path, "w:gz") as archive:
        for name, content in data.items():
            info = tarfile.TarInfo("LAC-2.1.2/LAC/" + name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return path


def patches(path: Path) -> List[Tuple[object, str, object]]:
    """(module, name, value) for the fake sdist at path to pass open_lac's checks."""
    import spacy_cner.pretrained.lac as lac_module
    from spacy_cner.pretrained.fetch import Sdist

    data = path.read_bytes()
    spec = Sdist("lac", "2.1.2", "LAC-2.1.2.tar.gz", hashlib.sha256(data).hexdigest(), len(data))
    return [
        (lac_module, "LAC_SDIST", spec),
        (lac_module, "VOCAB_SIZE", len(VOCAB)),
        (lac_module, "EMB_WIDTH", WIDTH),
        (lac_module, "HIDDEN_WIDTH", HIDDEN),
    ]


@contextlib.contextmanager
def accepted(path: Optional[Path]) -> Iterator[None]:
    """Inside it, open_lac accepts the fake sdist at path (nothing changes for None)."""
    import pytest

    with pytest.MonkeyPatch.context() as patch:
        for target, name, value in patches(path) if path is not None else []:
            patch.setattr(target, name, value)
        yield
