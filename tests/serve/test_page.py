"""The page at GET / in a real browser: headless Chromium (Debian's chromium package) driven over the Chrome
DevTools protocol. It shows the sample text's entities in displaCy's colours with their probabilities, the
alternatives on hover, an error in one line, and loads nothing from anywhere but the server."""

import base64
import contextlib
import json
import re
import shutil
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from serve_helpers import SAMPLE, fixed_nlp, running, settings

pytest.importorskip("uvicorn", reason="the serve extra (uvicorn, Starlette) is not installed")
websockets_sync = pytest.importorskip("websockets.sync.client", reason="websockets (the test extra) is not installed")


class Browser:
    """Headless Chromium with one page, commanded over the DevTools protocol (a websocket)."""

    def __init__(self, executable: str, profile: Path):
        self.process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "--window-size=900,600",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            url = found.group(1) if found else None
        if url is None:
            self.close()
            raise RuntimeError("Chromium did not start its DevTools server")
        self.stack = contextlib.ExitStack()
        self.socket = self.stack.enter_context(websockets_sync.connect(url, max_size=None, open_timeout=30))
        self.next_id = 0
        self.session: Optional[str] = None

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, timeout: float = 60) -> Dict[str, Any]:
        self.next_id += 1
        message: Dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            answer = json.loads(self.socket.recv(timeout=max(deadline - time.monotonic(), 0.1)))
            if answer.get("id") == self.next_id:  # events in between are not ours
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except RuntimeError:  # the page is not there yet
                value = None
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"{expression} still false after {timeout} s")

    def close(self) -> None:
        if getattr(self, "stack", None) is not None:
            self.stack.close()
        self.process.kill()
        self.process.wait()


def chromium() -> Optional[str]:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def browser(tmp_path):
    executable = chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium package)")
    opened = Browser(executable, tmp_path / "profile")
    yield opened
    opened.close()


ENTITIES = """Array.from(document.querySelectorAll('#result mark.entity')).map(m => ({
  text: m.firstChild.textContent, label: m.dataset.label, score: m.querySelector('.score').textContent,
  background: getComputedStyle(m).backgroundColor,
  tooltip: getComputedStyle(m.querySelector('.alternatives')).display,
  alternatives: m.querySelector('.alternatives').innerText}))"""


def test_the_page_shows_entities_probabilities_and_alternatives_on_hover(browser, tmp_path):
    with running(settings(), fixed_nlp()) as server:
        origin = f"http://127.0.0.1:{server.port}"
        browser.open(f"{origin}/?text={urllib.parse.quote(SAMPLE)}")
        browser.wait_for("document.body.dataset.state === 'done'")
        entities = browser.evaluate(ENTITIES)
        found = [(e["text"], e["label"], e["score"]) for e in entities]
        assert found == [("张三", "PER", "0.970"), ("北京", "LOC", "0.910")]
        # displaCy's colours: PERSON's for PER, LOC's for LOC.
        assert [e["background"] for e in entities] == ["rgb(170, 156, 252)", "rgb(255, 149, 97)"]
        assert all(e["tooltip"] == "none" for e in entities)
        assert browser.evaluate("document.querySelector('#table tbody').innerText").count("0.910") == 1
        box = browser.evaluate(
            "(() => { const r = document.querySelectorAll('#result mark.entity')[1].getBoundingClientRect();"
            " return [r.left + 5, r.top + r.height / 2]; })()"
        )
        browser.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": box[0], "y": box[1]})
        hovered = browser.wait_for(f"(() => {{ const e = {ENTITIES}[1]; return e.tooltip === 'block' && e; }})()")
        assert "北京 ORG 0.060" in hovered["alternatives"] and "北京工作 LOC 0.020" in hovered["alternatives"]
        png = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"})["data"])
        assert png.startswith(b"\x89PNG")
        (tmp_path / "page.png").write_bytes(png)
        # Nothing from a CDN: every resource the page loaded came from the server.
        resources = browser.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
        assert resources and all(url.startswith(origin + "/") for url in resources)
        # A bad text: the server's one line, shown on the page.
        browser.evaluate("document.getElementById('text').value = ''; document.getElementById('run').click()")
        error = browser.wait_for(
            "document.body.dataset.state === 'error' && document.getElementById('error').textContent"
        )
        assert error == '422: "text" is empty: send text to annotate.'
