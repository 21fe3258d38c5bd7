"""`python -m spacy_cner serve`: a real process (uvicorn's signal handling) that serves, and shuts down on
SIGTERM; a model it cannot serve fails in one line before the server starts."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import spacy
from typer.testing import CliRunner

from serve_helpers import request, toy_nlp

from spacy_cner.cli import app

pytest.importorskip("uvicorn", reason="the serve extra (uvicorn, Starlette) is not installed")


def test_serve_answers_then_stops_on_sigterm(tmp_path):
    toy_nlp().to_disk(tmp_path / "model")
    command = [sys.executable, "-m", "spacy_cner", "serve", str(tmp_path / "model"), "--port", "0", "--threads", "1"]
    environ = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ)
    try:
        lines = []
        deadline = time.monotonic() + 240
        port = None
        while port is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            found = re.search(r"running on http://127\.0\.0\.1:(\d+)", line)
            port = int(found.group(1)) if found else None
        assert port, "".join(lines)
        while request(port, "GET", "/readyz")[0] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        status, _, row = request(port, "POST", "/v1/entities", {"text": "张三去了上海"})
        assert status == 200 and row["text"] == "张三去了上海" and isinstance(row["entities"], list)
        process.send_signal(signal.SIGTERM)
        # uvicorn shuts down (the app's shutdown drains the batcher), then ends by the signal it caught, as a
        # process manager expects.
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)
        output = "".join(lines) + process.stdout.read()
        assert "Application shutdown complete" in output and "Traceback" not in output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_pipeline_without_entities_fails_in_one_line(tmp_path):
    spacy.blank("zh").to_disk(tmp_path / "blank")
    result = CliRunner().invoke(app, ["serve", str(tmp_path / "blank"), "--port", "0"])
    assert result.exit_code == 1
    output = " ".join(result.output.split())  # wasabi wraps long lines
    assert "finds no entities to serve" in output and "Traceback" not in output
    result = CliRunner().invoke(app, ["serve", str(tmp_path / "missing")])
    assert result.exit_code == 1 and "Cannot serve the pipeline" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["serve", str(tmp_path / "blank"), "--max-batch", "0"])
    assert result.exit_code == 1 and "--max-batch must be at least 1" in " ".join(result.output.split())
