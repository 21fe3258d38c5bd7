"""Fetch a package's source distribution from the package indexes pip uses, hash-checked and cached.

Pretrained weights reach machines that can only reach a package registry inside sdists (Baidu's
LAC). `pip download` cannot get one without running its setup.py (LAC's imports pkg_resources and
fails on a current setuptools), so the file is found through the indexes' simple API instead
(simple_index.py: the index URLs, extra index URLs, find-links, certificates and proxy of the user's pip
configuration, nothing written here) and downloaded with requests: no code of the package runs. The file is checked
against the sha256 and size we expect before it is used, and kept in a user cache folder. A
machine without a registry passes a local copy of the tarball (checked the same way).
"""

import glob
import hashlib
import os
import re
import shutil
import socket
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

from . import simple_index

# Environment variable naming the cache folder (default: $XDG_CACHE_HOME/spacy_cner or ~/.cache/spacy_cner).
CACHE_ENV = "SPACY_CNER_CACHE"
# Environment variable that forbids downloads ("1"): only a local copy or the cache is read (as
# HF_HUB_OFFLINE does for Hugging Face); the test suite sets it so that no test downloads 65 MB.
OFFLINE_ENV = "SPACY_CNER_OFFLINE"
# A partial download another host left, unchanged this long, is no live download's (fetch_sdist removes it).
PARTIAL_STALE_S = 24 * 3600


@dataclass(frozen=True)
class Sdist:
    """A source distribution we read weights from: its project, version, file name, sha256 and size."""

    project: str
    version: str
    filename: str
    sha256: str
    size: int


def cache_dir() -> Path:
    """The folder fetched files are kept in ($SPACY_CNER_CACHE, else the user's cache folder)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "spacy_cner"


def sha256_of(path: Union[str, Path]) -> str:
    """The sha256 of a file, read in 1 MB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_file(path: Union[str, Path], sdist: Sdist) -> Path:
    """path if it is sdist's file (size and sha256), else a ValueError naming it and what differs."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file (expected {sdist.filename}).")
    size = path.stat().st_size
    if size != sdist.size:
        raise ValueError(
            f"{path}: {size:,} bytes, expected {sdist.size:,} ({sdist.filename}). Delete it and fetch again."
        )
    found = sha256_of(path)
    if found != sdist.sha256:
        raise ValueError(
            f"{path}: sha256 {found}, expected {sdist.sha256} ({sdist.filename}). Delete it and fetch again."
        )
    return path


def fetch_sdist(
    sdist: Sdist,
    local: Optional[Union[str, Path]] = None,
    cache: Optional[Union[str, Path]] = None,
    progress: Optional[Callable[[int, int], None]] = None,
) -> Path:
    """The path of sdist's checked tarball: local when given, else the cached copy, else downloaded
    from the indexes pip uses (find_url) into the cache.

    sdist (Sdist): What to fetch.
    local (Optional[Union[str, Path]]): A copy of the tarball on this machine (checked, not copied).
    cache (Optional[Union[str, Path]]): The cache folder (default: cache_dir()).
    progress (Optional[Callable[[int, int], None]]): Called with (bytes so far, total) while downloading.
    RETURNS (Path): The checked file.
    """
    if local is not None:
        return check_file(local, sdist)
    folder = Path(cache) if cache is not None else cache_dir()
    target = folder / sdist.filename
    if folder.is_dir():
        remove_stale_partials(folder, sdist)
    if target.exists():
        return check_file(target, sdist)
    if os.environ.get(OFFLINE_ENV, "") not in ("", "0"):
        raise RuntimeError(
            f"{sdist.filename} is not in the cache ({target}) and {OFFLINE_ENV} forbids downloading it: "
            f"pass a local copy (--paths.lac_sdist PATH or --sdist PATH), put it in {folder}, or unset {OFFLINE_ENV}."
        )
    url = find_url(sdist)
    folder.mkdir(parents=True, exist_ok=True)
    # The download goes to a name of its own (this host and process), renamed to the cached name once its size
    # and sha256 match: a download cut short never passes for the file, and a later fetch removes what it left.
    handle, partial = tempfile.mkstemp(prefix=f"{sdist.filename}.{_host()}.{os.getpid()}.", suffix=".part", dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            _download(url, file, sdist.size, progress)
        check_file(partial, sdist)
        os.chmod(partial, 0o644)  # mkstemp's 0600: the cache may be shared
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def remove_stale_partials(folder: Path, sdist: Sdist) -> List[Path]:
    """Remove the partial downloads of sdist in folder that no download is writing: those this host's processes
    left that are gone (a fetch killed), and any not written for PARTIAL_STALE_S (another host's).

    RETURNS (List[Path]): The files removed.
    """
    removed = []
    for path in folder.glob(f"{glob.escape(sdist.filename)}.*.part"):
        parts = path.name[len(sdist.filename) + 1 :].split(".")
        host, pid = (parts[0], parts[1]) if len(parts) >= 3 else ("", "")
        try:
            if host == _host() and pid.isdigit():
                stale = not _alive(int(pid))
            else:
                stale = time.time() - path.stat().st_mtime > PARTIAL_STALE_S
            if stale:
                path.unlink()
                removed.append(path)
        except FileNotFoundError:  # removed meanwhile
            continue
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _host() -> str:
    """This host's name, safe in a file name (no dots: they separate the partial name's parts)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname()) or "host"


def find_url(sdist: Sdist) -> str:
    """The URL of sdist's file on the package indexes pip is configured to use (simple_index.py: their simple
    API, pip's index URLs, extra index URLs and find-links), one whose listed sha256 is sdist's."""
    settings = simple_index.pip_settings()
    url = simple_index.find_file(sdist.project, sdist.filename, sdist.sha256, settings)
    if url is None:
        raise RuntimeError(
            f"{sdist.filename} ({sdist.project}=={sdist.version}) is not on the package indexes pip uses here "
            f"({simple_index.describe(settings)}; `pip config list` shows the settings). Download it where it is "
            f"reachable and pass the local file (--sdist PATH), or set {CACHE_ENV} to a folder holding it."
        )
    return url


def _download(url: str, file, total: int, progress: Optional[Callable[[int, int], None]]) -> None:
    """Write url's bytes to file: a local file copied, else through requests with pip's certificates, proxy,
    trusted hosts and timeout."""
    if url.startswith("file:"):
        with open(urllib.request.url2pathname(urllib.parse.urlparse(url).path), "rb") as source:
            shutil.copyfileobj(source, file)
        return
    settings = simple_index.pip_settings()
    with simple_index.session(settings) as client:
        options = simple_index.request_options(url, settings)
        with client.get(url, stream=True, headers={"Accept-Encoding": "identity"}, **options) as response:
            response.raise_for_status()
            done = 0
            for block in response.iter_content(1 << 20):
                file.write(block)
                done += len(block)
                if progress is not None:
                    progress(done, total)


def download_progress(name: str = "LAC-2.1.2.tar.gz") -> Callable[[int, int], None]:
    """A progress bar for the download of the file name (tqdm, as spaCy's own commands use), closed when it
    is complete: fetch_sdist's progress."""
    from tqdm import tqdm

    bar: Dict[str, tqdm] = {}

    def update(done: int, total: int) -> None:
        if "bar" not in bar:
            bar["bar"] = tqdm(total=total, unit="B", unit_scale=True, desc=name)
        bar["bar"].update(done - bar["bar"].n)
        if done >= total:
            bar["bar"].close()

    return update
