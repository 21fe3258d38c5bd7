"""Find a distribution file on the package indexes pip is configured to use, through their simple API (PEP 503's
HTML pages, PEP 691's JSON), with requests: no pip internals, none of pip's own messages.

What is honoured, as pip reads it: the index URL, extra index URLs, find-links (folders, files and pages),
no-index, certificates (cert, client-cert), trusted hosts, proxy and timeout, from pip's configuration files
and PIP_* environment variables, as `python -m pip config list` gives them merged (pip's own precedence among
its files), the environment over the files and [download] over [install] over [global]. Without a configured
index URL, pip's own default (its PyPI constant, read at run time) is the index.
"""

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

# PEP 691: JSON first, then HTML (PEP 503), then any HTML page (a find-links page).
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
# Where pip's sections apply to a download, the later overriding the earlier.
SECTIONS = ("global", "install", "download")


@dataclass
class IndexSettings:
    """What pip is configured to read files from, and how it reaches them."""

    index_url: Optional[str] = None
    extra_index_urls: List[str] = field(default_factory=list)
    find_links: List[str] = field(default_factory=list)
    no_index: bool = False
    cert: Optional[str] = None
    client_cert: Optional[str] = None
    trusted_hosts: List[str] = field(default_factory=list)
    proxy: Optional[str] = None
    timeout: float = 15.0

    def index_urls(self) -> List[str]:
        """The indexes to ask, in order (none with no-index)."""
        if self.no_index:
            return []
        return [self.index_url or pip_default_index()] + self.extra_index_urls


@dataclass(frozen=True)
class FileLink:
    """A file an index or find-links location offers: its URL and, where given, its sha256."""

    filename: str
    url: str
    sha256: Optional[str]


def pip_settings() -> IndexSettings:
    """pip's index settings here (`python -m pip config list`: its files and PIP_* variables, merged as pip merges
    them); the PIP_* variables alone where pip cannot be run."""
    values: Dict[str, str] = {}
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60
        )
        lines = listed.stdout.splitlines() if listed.returncode == 0 else []
    except (OSError, subprocess.SubprocessError):
        lines = []
    found: Dict[Tuple[str, str], str] = {}
    for line in lines:
        key, _, value = line.partition("=")
        section, _, name = key.partition(".")
        try:
            found[section, name] = str(ast.literal_eval(value))
        except (ValueError, SyntaxError):
            continue
    for section in (*SECTIONS, ":env:"):
        values.update({name: value for (where, name), value in found.items() if where == section})
    for variable, value in os.environ.items():  # pip's own environment wins (and stands in where pip did not run)
        if variable.startswith("PIP_"):
            values[variable[4:].lower().replace("_", "-")] = value
    return IndexSettings(
        index_url=values.get("index-url") or None,
        extra_index_urls=values.get("extra-index-url", "").split(),
        find_links=values.get("find-links", "").split(),
        no_index=values.get("no-index", "").lower() in ("1", "true", "yes", "on"),
        cert=values.get("cert"),
        client_cert=values.get("client-cert"),
        trusted_hosts=values.get("trusted-host", "").split(),
        proxy=values.get("proxy"),
        timeout=float(values.get("timeout") or values.get("default-timeout") or 15.0),
    )


def pip_default_index() -> str:
    """The index pip uses when none is configured: its own constant, read at run time (the one piece of pip's
    internals read here: a value, no code run)."""
    try:
        from pip._internal.models.index import PyPI
    except ImportError as err:
        raise RuntimeError(
            "No package index is configured and pip's default cannot be read: set PIP_INDEX_URL (or index-url in "
            "pip.conf), or pass a local copy of the file."
        ) from err
    return PyPI.simple_url


def normalized(project: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", project).lower()


def find_file(project: str, filename: str, sha256: str, settings: Optional[IndexSettings] = None) -> Optional[str]:
    """The URL of filename (case-insensitive) on the first index or find-links location that offers it, one whose
    listed sha256 (if it gives one) is sha256; None where none does.

    project (str): The project whose page the indexes are asked for.
    filename (str): The file's name.
    sha256 (str): The file's expected sha256 (a listing with another is passed over).
    settings (Optional[IndexSettings]): pip's settings (default: pip_settings()).
    """
    settings = settings if settings is not None else pip_settings()
    wanted = filename.lower()
    locations = [f"{url.rstrip('/')}/{normalized(project)}/" for url in settings.index_urls()] + settings.find_links
    for location in locations:
        for link in links_at(location, settings):
            if link.filename.lower() == wanted and (link.sha256 is None or link.sha256 == sha256):
                return link.url
    return None


def links_at(location: str, settings: IndexSettings) -> Iterator[FileLink]:
    """The files a location offers: an index's project page or a find-links page (HTML or JSON), a local folder
    (its files, or its index.html), a local file. A location that cannot be read offers none."""
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme in ("http", "https"):
        page = _get_page(location, settings)
        if page is not None:
            yield from _page_links(*page)
        return
    path = Path(urllib.request.url2pathname(parsed.path)) if parsed.scheme == "file" else Path(location).expanduser()
    if path.is_dir():
        if (path / "index.html").is_file():
            yield from _page_links(path.as_uri() + "/", "text/html", (path / "index.html").read_bytes())
        else:
            for child in sorted(path.iterdir()):
                if child.is_file():
                    yield FileLink(child.name, child.resolve().as_uri(), None)
    elif path.is_file():
        if path.suffix in (".html", ".htm"):
            yield from _page_links(path.resolve().as_uri(), "text/html", path.read_bytes())
        else:
            yield FileLink(path.name, path.resolve().as_uri(), None)


def session(settings: IndexSettings):
    """A requests session with pip's certificates, client certificate and proxy."""
    import requests

    client = requests.Session()
    if settings.cert:
        client.verify = settings.cert
    if settings.client_cert:
        client.cert = settings.client_cert
    if settings.proxy:
        client.proxies = {"http": settings.proxy, "https": settings.proxy}
    return client


def request_options(url: str, settings: IndexSettings) -> Dict:
    """requests' per-request options for url: the timeout, and no certificate check on a trusted host."""
    host = urllib.parse.urlparse(url)
    trusted = {host.hostname, f"{host.hostname}:{host.port}"} & set(settings.trusted_hosts)
    return {"timeout": settings.timeout, **({"verify": False} if trusted else {})}


def _get_page(url: str, settings: IndexSettings) -> Optional[Tuple[str, str, bytes]]:
    import requests

    try:
        with session(settings) as client:
            response = client.get(url, headers={"Accept": ACCEPT}, **request_options(url, settings))
    except requests.RequestException:
        return None
    if response.status_code != 200:
        return None
    return response.url, response.headers.get("Content-Type", "text/html"), response.content


def _page_links(url: str, content_type: str, content: bytes) -> Iterator[FileLink]:
    """The files of a simple-API page: PEP 691 JSON, else PEP 503 HTML (anchors, their #sha256= fragments)."""
    if content_type.split(";")[0].strip() == "application/vnd.pypi.simple.v1+json":
        try:
            files = json.loads(content.decode("utf8")).get("files", [])
        except (ValueError, UnicodeDecodeError, AttributeError):
            return
        for entry in files:
            if isinstance(entry, dict) and entry.get("filename") and entry.get("url"):
                hashes = entry.get("hashes") if isinstance(entry.get("hashes"), dict) else {}
                yield FileLink(entry["filename"], urllib.parse.urljoin(url, entry["url"]), hashes.get("sha256"))
        return
    parser = _Anchors()
    parser.feed(content.decode("utf8", errors="replace"))
    base = urllib.parse.urljoin(url, parser.base) if parser.base else url
    for href in parser.hrefs:
        link = urllib.parse.urljoin(base, href)
        without, _, fragment = link.partition("#")
        name = urllib.parse.unquote(urllib.parse.urlparse(without).path.rsplit("/", 1)[-1])
        digest = dict(part.split("=", 1) for part in fragment.split("&") if "=" in part).get("sha256")
        if name:
            yield FileLink(name, without, digest)


class _Anchors(HTMLParser):
    """The hrefs of a page's anchors, and its <base href>."""

    def __init__(self):
        super().__init__()
        self.hrefs: List[str] = []
        self.base: Optional[str] = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "a" and attributes.get("href"):
            self.hrefs.append(attributes["href"])
        elif tag == "base" and attributes.get("href") and self.base is None:
            self.base = attributes["href"]


def describe(settings: IndexSettings) -> str:
    """The places asked, for a message."""
    places = settings.index_urls() + settings.find_links
    return ", ".join(shlex.quote(place) for place in places) or "none (no-index and no find-links)"
