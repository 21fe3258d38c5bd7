"""The ready LAC pipeline as an installed package, as `spacy download` installs zh_core_web_sm: a wheel holding
the pipeline (spaCy's package layout: NAME/__init__.py with spaCy's loader, NAME/NAME-VERSION/ the pipeline)
built here and installed with pip, so that `spacy.load(NAME)` works from any folder; and its model card.

The wheel is written directly (PEP 427: a zip with the files, their hashes in RECORD, METADATA and
entry_points.txt), not through `spacy package`: that one builds through setuptools in an isolated
environment (an index to reach, and a minute for 34 MB of data), where these few files are all a wheel is.
"""

import base64
import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from spacy.cli.package import TEMPLATE_INIT, generate_readme
from spacy.language import Language

from .lac_analyzer import OTHER_TAG, SPACE_TAG, SYMBOL_TAG
from .lac_pipeline import LABEL_MEANINGS, TAG_MEANINGS

# A package name: spaCy's lang_name, a Python identifier (the package is imported by it).
PACKAGE_NAME = re.compile(r"zh_[A-Za-z0-9_]+")
# The zero-shot scores the model card gives: written beside this module by the LAC zero-shot benchmark
# (BENCHMARKS.md#lac).
ZERO_SHOT = Path(__file__).with_name("lac_zero_shot.json")


def check_package_name(name: str) -> None:
    """A ValueError unless name can be the package's name (zh_ and letters, digits, underscores)."""
    if not PACKAGE_NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a package name: it must be zh_ and letters, digits or underscores (zh_lac), as "
            "spaCy names its packages lang_name; to write the pipeline into a folder, give a path (./zh_lac)."
        )


def installed_version(name: str, target: Optional[Union[str, Path]] = None) -> Optional[str]:
    """The version and place of an installed distribution name ("2.1.2 in /...site-packages"), or None.

    target (Optional[Union[str, Path]]): Look in this folder only (pip install --target), not sys.path.
    """
    try:
        if target is None:
            distribution = importlib.metadata.distribution(name)
        else:
            found = list(importlib.metadata.distributions(name=name, path=[str(target)]))
            if not found:
                return None
            distribution = found[0]
    except importlib.metadata.PackageNotFoundError:
        return None
    place = distribution.locate_file("")
    return f"{distribution.version} in {place}"


def model_card(nlp: Language) -> str:
    """The pipeline's model card (meta["notes"], which generate_readme puts in the package's README): its labels
    and tags and what they mean, its zero-shot scores, what ent._.score is, where it departs from LAC, the
    licence."""
    sections = ["### Entities (`doc.ents`)", "", "| label | meaning |", "| --- | --- |"]
    sections += [f"| `{label}` | {meaning} |" for label, meaning in LABEL_MEANINGS.items()]
    sections += [
        "",
        "`ent._.score` is the entity's probability under LAC's own CRF (forward-backward over its emission scores "
        "and transitions): that its ids are tagged L-B L-I ... with the next one not L-I.",
        "",
        "### Tags (`token.tag_`)",
        "",
        "| tag | meaning |",
        "| --- | --- |",
    ]
    sections += [f"| `{tag}` | {meaning} |" for tag, meaning in TAG_MEANINGS.items()]
    sections += ["", "Loading the pipeline teaches these to `spacy.explain` (terms spaCy explains keep its meaning)."]
    sections += ["", zero_shot_section()]
    sections += [
        "",
        "### Where it departs from LAC",
        "",
        "Its words and tags are LAC 2.1.2's, read sentence by sentence, but for text LAC tags O (cut into its own "
        f"words, tagged `{OTHER_TAG}` or `{SYMBOL_TAG}`), whitespace (its own token, `{SPACE_TAG}`) and emoji "
        f"(their own token, `{SYMBOL_TAG}`), which never join another word nor an entity.",
        "",
        "### Licence",
        "",
        "Apache-2.0: the weights, dictionaries and tag set are Baidu's LAC 2.1.2 (https://github.com/baidu/lac, "
        "Apache License 2.0, https://www.apache.org/licenses/LICENSE-2.0), converted to torch by spacy_cner "
        "without retraining. Redistributing the package means passing on that licence.",
    ]
    return "\n".join(sections)


def zero_shot_section() -> str:
    """The zero-shot scores (ZERO_SHOT, written by the zero-shot benchmark) as a Markdown table."""
    if not ZERO_SHOT.exists():
        raise ValueError(f"{ZERO_SHOT} is missing: reinstall spacy-cner (it ships the model card's scores).")
    data = json.loads(ZERO_SHOT.read_text(encoding="utf8"))
    rows = [
        "### Zero-shot scores",
        "",
        f"No training: exact character spans on test splits (`{data['command']}`, {data['date'][:10]}, commit "
        f"{data['commit'][:8]}); MSRA's NR/NS/NT read as PER/LOC/ORG, TIME not scored (neither set marks it).",
        "",
        "| test split | sentences | P | R | F1 | PER F1 | LOC F1 | ORG F1 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for split, figures in data["splits"].items():
        rows.append(
            f"| {split} | {figures['sentences']:,} | {figures['all']['p']:.2f} | {figures['all']['r']:.2f} | "
            f"{figures['all']['f']:.2f} | "
            + " | ".join(f"{figures[label]['f']:.2f}" for label in ("PER", "LOC", "ORG"))
            + " |"
        )
    return "\n".join(rows)


def write_wheel(nlp: Language, name: str, folder: Union[str, Path]) -> Path:
    """The pipeline as a wheel in folder, named and laid out as `spacy package` lays out NAME.

    nlp (Language): The pipeline (its meta's version is the package's).
    name (str): The package name (check_package_name).
    folder (Union[str, Path]): Where the wheel is written.
    RETURNS (Path): The wheel.
    """
    check_package_name(name)
    version = nlp.meta["version"]
    meta = dict(nlp.meta)
    meta["name"] = name[len("zh_") :]
    meta["notes"] = model_card(nlp)
    readme = generate_readme(meta)
    meta_bytes = json.dumps(meta, indent=2, ensure_ascii=False).encode("utf8")
    files: Dict[str, bytes] = {
        f"{name}/__init__.py": TEMPLATE_INIT.format(imports="").encode("utf8"),
        f"{name}/meta.json": meta_bytes,
    }
    data = f"{name}/{name}-{version}"
    with tempfile.TemporaryDirectory() as scratch:
        nlp.to_disk(scratch)
        for path in sorted(Path(scratch).rglob("*")):
            if path.is_file():
                files[f"{data}/{path.relative_to(scratch).as_posix()}"] = path.read_bytes()
    files[f"{data}/meta.json"] = meta_bytes
    files[f"{data}/README.md"] = readme.encode("utf8")
    dist_info = f"{name}-{version}.dist-info"
    files[f"{dist_info}/METADATA"] = _metadata(name, version, meta, readme).encode("utf8")
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: spacy_cner\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{dist_info}/entry_points.txt"] = f"[spacy_models]\n{name} = {name}\n".encode("utf8")
    record = [f"{path},sha256={_digest(content)},{len(content)}" for path, content in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n").encode("utf8")
    wheel = Path(folder) / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, content in files.items():
            archive.writestr(path, content)
    return wheel


def install_wheel(wheel: Union[str, Path], force: bool = False, target: Optional[Union[str, Path]] = None) -> None:
    """pip install the wheel (no index, no dependencies: spacy-cner and spaCy are here), reinstalling it with
    force; into target instead of this environment's site-packages when given. A RuntimeError with pip's
    output where it fails."""
    command: List[str] = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index"]
    command.append("--disable-pip-version-check")
    if force:
        command.append("--force-reinstall")
    if target is not None:
        command += ["--target", str(target)] + (["--upgrade"] if force else [])
    command.append(str(wheel))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip().splitlines()
        raise RuntimeError(
            f"pip could not install {Path(wheel).name} (exit {done.returncode}): " + " / ".join(output[-3:])
        )


def _metadata(name: str, version: str, meta: Dict[str, Any], readme: str) -> str:
    from ..about import __version__

    lines: Sequence[str] = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {meta.get('description', '')}",
        f"Home-page: {meta.get('url', '')}",
        f"Author: {meta.get('author', '')}",
        f"License: {meta.get('license', '')}",
        f"Requires-Dist: spacy-cner>={__version__}",
        f"Requires-Dist: spacy{meta['spacy_version']}",
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + readme + "\n"


def _digest(content: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode("ascii")
