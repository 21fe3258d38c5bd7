"""The files a command wrote, on record beside them (each one's name and sha256), so that a rerun
overwrites or deletes only a file it wrote and that nobody changed since: never one it finds there,
whatever that holds (a blank first line, `null` or `[]` are someone's data as much as any text)."""

import hashlib
import json
import os
from pathlib import Path
from typing import Dict, List


class OwnedFiles:
    """The record of the files one command wrote into one folder: RECORD (a JSON file beside them)
    maps each file's name to the sha256 of what the command wrote there.

    record (Path): The record's path (e.g. OUT.select.json beside OUT).
    command (str): The command that writes the files, named in the record and in the errors.
    """

    def __init__(self, record: Path, command: str):
        self.record, self.command = Path(record), command
        self._hashes: Dict[str, List[str]] = self._read()

    def owns(self, path: Path) -> bool:
        """Whether path is a file this command wrote, unchanged since (its sha256 is on record)."""
        path = Path(path)
        hashes = self._hashes.get(path.name, [])
        return bool(hashes) and path.is_file() and _sha256(path.read_bytes()) in hashes

    def write(self, path: Path, data: bytes) -> None:
        """Write data to path, a new file or one this command owns, and record it. The record names
        the new content before the file is written: a run killed in between leaves a file whose old or
        new content is on record, which the next run may replace."""
        path = Path(path)
        self._check_beside(path)
        kept = []
        if path.exists():
            if not self.owns(path):
                raise ValueError(self._not_ours(path))
            kept = [_sha256(path.read_bytes())]
        digest = _sha256(data)
        self._hashes[path.name] = kept + [digest]
        self._save()
        path.write_bytes(data)
        self._hashes[path.name] = [digest]
        self._save()

    def remove(self, path: Path) -> None:
        """Delete path if this command wrote it (and nobody changed it since); a file it did not write
        is refused, never deleted."""
        path = Path(path)
        self._check_beside(path)
        if path.exists():
            if not self.owns(path):
                raise ValueError(self._not_ours(path))
            path.unlink()
        if self._hashes.pop(path.name, None) is not None:
            self._save()

    def _not_ours(self, path: Path) -> str:
        return (
            f"{path} exists and {self.command} did not write it, or it changed since ({self.record.name} "
            f"records what {self.command} wrote): {self.command} would overwrite it; move it away or name "
            "another output file."
        )

    def _check_beside(self, path: Path) -> None:
        if path.parent.resolve() != self.record.parent.resolve():
            raise ValueError(f"{path} is not beside {self.record}: the record names the files of its own folder.")

    def _read(self) -> Dict[str, List[str]]:
        if not self.record.exists() and not self.record.is_symlink():
            return {}
        try:
            data = json.loads(self.record.read_text(encoding="utf8"))
        except (OSError, ValueError):  # a folder, unreadable, not UTF-8 or not JSON
            data = None
        files = data.get("files") if isinstance(data, dict) and data.get("written_by") == self._tag else None
        if not isinstance(files, dict):
            raise ValueError(
                f"{self.record} is not {self.command}'s record of the files it wrote: {self.command} would "
                "overwrite it; move it away or name another output file."
            )
        return {
            name: [h for h in hashes if isinstance(h, str)]
            for name, hashes in files.items()
            if isinstance(hashes, list)
        }

    def _save(self) -> None:
        self.record.parent.mkdir(parents=True, exist_ok=True)
        partial = self.record.with_name(f"{self.record.name}.partial")
        partial.write_text(json.dumps({"written_by": self._tag, "files": self._hashes}, indent=1) + "\n", "utf8")
        os.replace(partial, self.record)  # the record is whole or as it was, never half written

    @property
    def _tag(self) -> str:
        return f"spacy_cner {self.command}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
