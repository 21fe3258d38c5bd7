"""What makes a killed run resumable: the settings that bind an output folder, the model's fingerprint,
each input file's fingerprint (its size and sha256, taken before it is read, so that a resumed run
refuses a file whose written shards came from other content), and a done marker per input file (its
rows, shards, size and hash) that a rerun skips it by.

All of it lives beside the shards in OUTPUT/.annotate/, hidden from globs such as OUTPUT/*.jsonl.
"""

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from .inputs import Source
from .job import OUTPUT_FORMATS

# Progress and settings live beside the shards, hidden from globs such as OUTPUT/*.jsonl.
STATE_DIR = ".annotate"


def check_output_folder(output_dir: Path) -> None:
    """Refuse an output folder annotate cannot make (a file, or below one: an input file named as the
    output, say) or did not write (files there and no STATE_DIR): its shards could overwrite them."""
    target = Path(output_dir).resolve()
    for folder in [target, *target.parents]:
        if folder.exists() and not folder.is_dir():
            raise ValueError(
                f"output {output_dir}: {folder} is a file, not a folder: annotate writes a folder "
                "of shards; name a new folder."
            )
    if target.is_dir() and not (target / STATE_DIR).is_dir() and any(target.iterdir()):
        raise ValueError(
            f"output {output_dir} holds files annotate did not write (no {STATE_DIR}/ in it): "
            "name a new or empty folder, so that nothing there is overwritten."
        )


def check_settings(output_dir: Path, settings: Dict[str, Any]) -> None:
    """Refuse to resume into an output folder written with other settings: its shards would not match.
    Settings with no shard written yet (a run that failed at its start) bind nothing: replaced."""
    path = output_dir / STATE_DIR / "settings.json"
    if path.exists() and _has_shards(output_dir):
        previous = read_state(path)
        # New input files are fine (each file has its own shards); a change of these is not.
        keys = ["model", "shard_size", "output_format", "entities_field"]
        # Folders written before these were recorded lack them.
        keys += [key for key in ("model_fingerprint", "input_format", "text_field") if previous.get(key) is not None]
        keys += ["uncertainty", "uncertainty_seed"]  # absent (None) for plain annotations
        changed = [key for key in keys if previous.get(key) != settings.get(key)]
        if changed:
            details = "; ".join(f"{key}: {previous.get(key)!r} then, {settings.get(key)!r} now" for key in changed)
            raise ValueError(
                f"{output_dir} holds shards written with other settings ({details}). "
                "Rerun with the same settings to resume, or write to a new folder."
            )
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, ensure_ascii=False, indent=2), encoding="utf8")


def model_fingerprint(model: str) -> Optional[str]:
    """A hash of every file of the pipeline (a folder, or an installed package's), so that a resumed run
    can tell the same path now holding another model; None when the model cannot be found as files."""
    path = Path(model)
    if not path.exists():
        try:
            from spacy.util import get_package_path

            path = get_package_path(model)
        except Exception:  # not an installed package: spacy.load will say so
            return None
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(file.relative_to(path).as_posix().encode("utf8") + b"\0")
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def done_marker(output_dir: Path, source: Source) -> Path:
    """The file that says every shard of a source was written."""
    return output_dir / STATE_DIR / "done" / f"{source.name}.json"


def input_marker(output_dir: Path, source: Source) -> Path:
    """The file holding a source's fingerprint as it was when its shards were begun."""
    return output_dir / STATE_DIR / "inputs" / f"{source.name}.json"


def begin_input(output_dir: Path, source: Source, has_shards: bool) -> Dict[str, Any]:
    """Fingerprint a source before it is read and record it. Where shards of it were written before
    (a killed run), refuse content that does not continue what they were written from: resuming would
    mix rows of two versions of the file (a line inserted at the top shifts every row after it).

    RETURNS (Dict[str, Any]): The source's fingerprint now: {"size": bytes, "sha256": hex}.
    """
    path = input_marker(output_dir, source)
    # Shards written by a version that recorded no fingerprint are trusted, as done markers are.
    previous = read_state(path) if has_shards and path.exists() else None
    fingerprint = content_fingerprint(source.path, previous["size"] if previous else None)
    if previous is not None and not continues(previous, fingerprint, source.format):
        raise ValueError(_changed(source, output_dir, previous["size"], fingerprint["size"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"path": str(source.path), "size": fingerprint["size"], "sha256": fingerprint["sha256"]}),
        encoding="utf8",
    )
    return {"size": fingerprint["size"], "sha256": fingerprint["sha256"]}


def changed_source(output_dir: Path, sources: List[Source]) -> Optional[Source]:
    """The first source whose shards in output_dir were written from other content than it holds now
    (what begin_input and read_done_marker refuse), None when every one can be resumed."""
    for source in sources:
        done, begun = done_marker(output_dir, source), input_marker(output_dir, source)
        if done.exists():  # appended rows are resumed; its last shard is written again if need be
            previous = read_state(done)
            if "size" in previous and (
                content_fingerprint(source.path, previous["size"])["prefix_sha256"] != previous["sha256"]
            ):
                return source
        elif begun.exists():
            previous = read_state(begun)
            if not continues(previous, content_fingerprint(source.path, previous["size"]), source.format):
                return source
    return None


def read_done_marker(output_dir: Path, source: Source) -> Optional[Dict[str, Any]]:
    """A source's done marker, None if it has none. A source whose annotated content changed since (its
    first marker["size"] bytes differ) is refused; one that only grew is the caller's to resume
    (marker["ends_line"] then says whether its old content ended at a line's end)."""
    path = done_marker(output_dir, source)
    if not path.exists():
        return None
    marker = read_state(path)
    if "size" in marker:  # markers written before the content was recorded are trusted
        fingerprint = content_fingerprint(source.path, marker["size"])
        if fingerprint["prefix_sha256"] != marker["sha256"]:
            raise ValueError(_changed(source, output_dir, marker["size"], fingerprint["size"]))
        marker["ends_line"] = fingerprint["prefix_end"] in (b"", b"\n")
    return marker


def write_done_marker(
    output_dir: Path, source: Source, n_rows: int, n_shards: int, fingerprint: Optional[Dict[str, Any]] = None
) -> None:
    """Record that every shard of a source is written, with its content's size and hash (the
    fingerprint taken before it was read; taken now when None)."""
    marker = done_marker(output_dir, source)
    marker.parent.mkdir(parents=True, exist_ok=True)
    if fingerprint is None:
        fingerprint = content_fingerprint(source.path)
    state = {
        "path": str(source.path),
        "rows": n_rows,
        "shards": n_shards,
        "size": fingerprint["size"],
        "sha256": fingerprint["sha256"],
    }
    marker.write_text(json.dumps(state), encoding="utf8")


def content_fingerprint(path: Path, prefix_size: Optional[int] = None) -> Dict[str, Any]:
    """A file's size and sha256 in one pass, with the sha256 of its first prefix_size bytes and the last
    of them (b"" for none) where prefix_size is given and the file holds that many.

    RETURNS (Dict[str, Any]): {"size", "sha256", "prefix_sha256", "prefix_end"}.
    """
    digest, prefix_digest, prefix_end, size = hashlib.sha256(), None, b"", 0
    if prefix_size == 0:
        prefix_digest = digest.hexdigest()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            if prefix_digest is None and prefix_size is not None and size + len(chunk) >= prefix_size:
                head = chunk[: prefix_size - size]
                digest.update(head)
                prefix_digest, prefix_end = digest.hexdigest(), head[-1:] or prefix_end
                digest.update(chunk[len(head) :])
            else:
                digest.update(chunk)
                prefix_end = chunk[-1:] if prefix_digest is None else prefix_end
            size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest(), "prefix_sha256": prefix_digest, "prefix_end": prefix_end}


def continues(previous: Dict[str, Any], fingerprint: Dict[str, Any], file_format: str) -> bool:
    """Whether a file's content now is its content then (previous: size and sha256), perhaps with rows
    appended: the same first bytes, ending where a row ended (a text, JSONL, CSV or TSV file's last
    line without its line break would have grown; a Parquet file cannot grow in place)."""
    if fingerprint["prefix_sha256"] != previous["sha256"]:
        return False
    if fingerprint["size"] == previous["size"]:
        return True
    return file_format != "parquet" and fingerprint["prefix_end"] in (b"", b"\n")


def _changed(source: Source, output_dir: Path, size_then: int, size_now: int) -> str:
    """The one line that refuses a source whose content changed under its shards."""
    grown = f"{size_then:,} bytes then, {size_now:,} now" if size_now != size_then else f"{size_now:,} bytes"
    return (
        f"{source.path} changed since its shards in {output_dir} were written ({grown}; its content differs, "
        f"not only rows appended): resuming would mix two versions of it. To start over, delete "
        f"{output_dir} (or its {source.name}.* shards and {output_dir / STATE_DIR}), or write to a new folder."
    )


def read_state(path: Path) -> Dict[str, Any]:
    """A state file of the output folder (settings, a done marker), naming it when it is damaged."""
    try:
        state = json.loads(path.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{path} is damaged ({err}): delete it (a done marker: that input is read again; "
            "settings.json: they are recorded anew) and rerun."
        ) from None
    if not isinstance(state, dict):
        raise ValueError(f"{path} is damaged (not a JSON object): delete it and rerun.")
    return state


def _has_shards(output_dir: Path) -> bool:
    suffixes = set(OUTPUT_FORMATS.values())
    return any(path.is_file() and path.suffix in suffixes for path in output_dir.iterdir())
