"""Finding LAC's sdist through the simple API (simple_index.py) with pip's settings: PEP 691 JSON and PEP 503
HTML over a local HTTP server, find-links, pip.conf, no pip internals."""

import hashlib
import http.server
import json
import subprocess
import sys
import threading

import pytest

from spacy_cner.pretrained import fetch, simple_index
from spacy_cner.pretrained.fetch import Sdist, fetch_sdist

CONTENT = b"not really a tarball, but the bytes the hash is of"
DIGEST = hashlib.sha256(CONTENT).hexdigest()
SPEC = Sdist("lac", "2.1.2", "LAC-2.1.2.tar.gz", DIGEST, len(CONTENT))


@pytest.fixture
def index_server():
    """A local index: /json/lac/ answers PEP 691 JSON to a client that accepts it, /html/lac/ PEP 503 HTML, /bad/lac/
    lists the file with another sha256, /files/ holds it. Yields its base URL and the Accept headers it saw."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Accept", "")))
            if self.path == "/json/lac/" and "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", ""):
                files = [
                    {"filename": SPEC.filename, "url": "../../files/LAC-2.1.2.tar.gz", "hashes": {"sha256": DIGEST}}
                ]
                self._send("application/vnd.pypi.simple.v1+json", json.dumps({"files": files}).encode())
            elif self.path == "/html/lac/":
                self._send(
                    "text/html", f'<a href="/files/{SPEC.filename}#sha256={DIGEST}">{SPEC.filename}</a>'.encode()
                )
            elif self.path == "/bad/lac/":
                self._send("text/html", f'<a href="/files/{SPEC.filename}#sha256={"0" * 64}">x</a>'.encode())
            elif self.path == f"/files/{SPEC.filename}":
                self._send("application/octet-stream", CONTENT)
            else:
                self.send_error(404)

        def _send(self, content_type, body):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


@pytest.fixture
def pip_env(monkeypatch, tmp_path):
    """pip's settings from this test only: no pip.conf, no PIP_* variables of the machine's; downloads allowed."""
    for variable in [name for name in list(__import__("os").environ) if name.startswith("PIP_")]:
        monkeypatch.delenv(variable)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))  # pip reads it after the global files
    (tmp_path / "pip.conf").write_text("[global]\nextra-index-url =\nfind-links =\n", encoding="utf8")
    monkeypatch.delenv(fetch.OFFLINE_ENV, raising=False)
    return monkeypatch


def test_json_and_html_pages_their_hashes_and_the_download(index_server, pip_env, tmp_path):
    base, seen = index_server
    pip_env.setenv("PIP_INDEX_URL", f"{base}/bad/")  # lists the file with another hash: passed over
    pip_env.setenv("PIP_EXTRA_INDEX_URL", f"{base}/json/ {base}/html/")
    assert fetch.find_url(SPEC) == f"{base}/files/{SPEC.filename}"
    assert any(path == "/json/lac/" and "vnd.pypi.simple.v1+json" in accept for path, accept in seen)
    settings = simple_index.IndexSettings(index_url=f"{base}/html/")
    assert simple_index.find_file("LAC", SPEC.filename, DIGEST, settings) == f"{base}/files/{SPEC.filename}"
    path = fetch_sdist(SPEC, cache=tmp_path / "cache")
    assert path.read_bytes() == CONTENT
    pip_env.setenv("PIP_INDEX_URL", f"{base}/bad/")
    pip_env.setenv("PIP_EXTRA_INDEX_URL", f"{base}/missing/")
    with pytest.raises(RuntimeError, match=f"not on the package indexes pip uses here \\({base}/bad/, {base}/missing/"):
        fetch.find_url(SPEC)


def test_find_links_and_no_index(pip_env, tmp_path):
    folder = tmp_path / "wheels"
    folder.mkdir()
    (folder / SPEC.filename).write_bytes(CONTENT)
    pip_env.setenv("PIP_NO_INDEX", "1")
    pip_env.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/never-asked/")
    pip_env.setenv("PIP_FIND_LINKS", str(folder))
    assert fetch.find_url(SPEC) == (folder / SPEC.filename).resolve().as_uri()
    assert fetch_sdist(SPEC, cache=tmp_path / "cache").read_bytes() == CONTENT
    page = tmp_path / "links.html"
    page.write_text(f'<a href="wheels/{SPEC.filename}">it</a>', encoding="utf8")
    pip_env.setenv("PIP_FIND_LINKS", str(page))
    assert fetch.find_url(SPEC) == (folder / SPEC.filename).resolve().as_uri()


def test_pip_conf_sections_and_the_environment_over_them(pip_env, tmp_path):
    index = tmp_path / "simple"
    (index / "lac").mkdir(parents=True)
    (index / "lac" / SPEC.filename).write_bytes(CONTENT)
    other = tmp_path / "other"
    (other / "lac").mkdir(parents=True)
    (tmp_path / "pip.conf").write_text(
        f"[global]\nindex-url = {other.as_uri()}\nextra-index-url =\nfind-links =\n\n[download]\nindex-url = "
        f"{index.as_uri()}\n",
        encoding="utf8",
    )
    settings = simple_index.pip_settings()
    assert settings.index_url == index.as_uri() and settings.extra_index_urls == [] and settings.find_links == []
    assert fetch.find_url(SPEC) == (index / "lac" / SPEC.filename).resolve().as_uri()
    pip_env.setenv("PIP_INDEX_URL", other.as_uri())  # the environment over the files, as in pip
    with pytest.raises(RuntimeError, match="not on the package indexes"):
        fetch.find_url(SPEC)


def test_a_configured_index_needs_no_pip_internals(pip_env, tmp_path):
    """The file is found without importing pip's internals (they printed pip's own warnings); only an
    unconfigured index reads pip's default constant."""
    index = tmp_path / "simple"
    (index / "lac").mkdir(parents=True)
    (index / "lac" / SPEC.filename).write_bytes(CONTENT)
    pip_env.setenv("PIP_INDEX_URL", index.as_uri())
    script = (
        "import sys; from spacy_cner.pretrained import fetch; from spacy_cner.pretrained.fetch import Sdist; "
        f"print(fetch.find_url(Sdist('lac', '2.1.2', {SPEC.filename!r}, {DIGEST!r}, {SPEC.size})).endswith("
        f"{SPEC.filename!r}), any(m == 'pip' or m.startswith('pip.') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"] and done.stderr == ""
    assert simple_index.IndexSettings().index_urls()[0].endswith("/simple")  # pip's default, read from pip
