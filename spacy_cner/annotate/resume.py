"""What makes a killed run resumable: the settings that bind an output folder, the model's fingerprint,
and a done marker per input file (its rows, shards, size and hash) that a rerun skips it by.

All of it lives beside the shards in OUTPUT/.annotate/, hidden from globs such as OUTPUT/*.jsonl.
"""
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, Optional

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
            raise ValueError(f"output {output_dir}: {folder} is a file, not a folder: annotate writes a folder "
                             "of shards; name a new folder.")
    if target.is_dir() and not (target / STATE_DIR).is_dir() and any(target.iterdir()):
        raise ValueError(f"output {output_dir} holds files annotate did not write (no {STATE_DIR}/ in it): "
                         "name a new or empty folder, so that nothing there is overwritten.")


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
            raise ValueError(f"{output_dir} holds shards written with other settings ({details}). "
                             "Rerun with the same settings to resume, or write to a new folder.")
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


def read_done_marker(output_dir: Path, source: Source) -> Optional[Dict[str, Any]]:
    """A source's done marker, None if it has none. A source whose annotated content changed since (its
    first marker["size"] bytes differ) is refused; one that only grew is the caller's to resume."""
    path = done_marker(output_dir, source)
    if not path.exists():
        return None
    marker = read_state(path)
    if "size" in marker:  # markers written before the content was recorded are trusted
        size = source.path.stat().st_size
        unchanged = size >= marker["size"] and file_digest(source.path, marker["size"]) == marker["sha256"]
        if not unchanged:
            raise ValueError(
                f"{source.path} changed since its shards in {output_dir} were written (its first "
                f"{marker['size']:,} bytes differ): write to a new folder, or delete its shards and "
                f"{path} to annotate it again."
            )
    return marker


def write_done_marker(output_dir: Path, source: Source, n_rows: int, n_shards: int) -> None:
    """Record that every shard of a source is written, with its content's size and hash."""
    marker = done_marker(output_dir, source)
    marker.parent.mkdir(parents=True, exist_ok=True)
    size = source.path.stat().st_size
    state = {"path": str(source.path), "rows": n_rows, "shards": n_shards, "size": size,
             "sha256": file_digest(source.path, size)}
    marker.write_text(json.dumps(state), encoding="utf8")


def file_digest(path: Path, size: int) -> str:
    """sha256 of the first size bytes of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        left = size
        while left > 0:
            chunk = file.read(min(left, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest.hexdigest()


def read_state(path: Path) -> Dict[str, Any]:
    """A state file of the output folder (settings, a done marker), naming it when it is damaged."""
    try:
        state = json.loads(path.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is damaged ({err}): delete it (a done marker: that input is read again; "
                         "settings.json: they are recorded anew) and rerun.") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path} is damaged (not a JSON object): delete it and rerun.")
    return state


def _has_shards(output_dir: Path) -> bool:
    suffixes = set(OUTPUT_FORMATS.values())
    return any(path.is_file() and path.suffix in suffixes for path in output_dir.iterdir())
