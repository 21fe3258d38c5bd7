"""The README's Python snippets run, in order, as a reader would run them after the quick start.

The quick start's model is stood in for by a tiny pipeline trained here and saved where the
demo writes its own (training/resume/demo/model-best). The bash snippets are commands of the
project and of spaCy that CI runs elsewhere (the test command) or that need the full data.
"""
import re
from pathlib import Path

import spacy
from spacy.training import Example
from thinc.api import fix_random_seed

from conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
SENTENCE = "张三，男，1965年出生，现任北京大学光华管理学院教授。"
ENTITIES = [
    (SENTENCE.index(text), SENTENCE.index(text) + len(text), label)
    for text, label in (("张三", "NAME"), ("北京大学", "ORG"), ("光华管理学院", "ORG"), ("教授", "TITLE"))
]


def python_snippets() -> list:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf8"), flags=re.S)


def demo_model(path: Path) -> None:
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": {"@architectures": "spacy-cner.CharBigramEmbed.v1", "width": 32, "char_rows": 500, "bigram_rows": 500, "bigram_dropout": 0.0},
        "encoder": {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 32, "dropout": 0.0},
    }
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = [Example.from_dict(nlp.make_doc(SENTENCE), {"entities": ENTITIES})]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    path.parent.mkdir(parents=True)
    nlp.to_disk(path)


def test_readme_python_snippets_run(tmp_path, monkeypatch, capsys):
    snippets = python_snippets()
    assert len(snippets) >= 3
    demo_model(tmp_path / "training" / "resume" / "demo" / "model-best")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, snippet in enumerate(snippets):
        try:
            exec(compile(snippet, f"README.md python snippet {i + 1}", "exec"), namespace)
        except Exception as error:  # pragma: no cover - the message says which snippet
            raise AssertionError(f"README python snippet {i + 1} failed: {error!r}\n{snippet}") from error
    printed = capsys.readouterr().out
    assert "('张三', 'NAME')" in printed  # snippet 1's entities
    assert "北京大学\tORG\t" in printed  # snippet 2's scored spans
    assert '{"text": "张三，现任北京大学教授。", "entities": [' in printed  # the annotate snippet's first row


def test_readme_package_snippet_installs_what_it_builds(tmp_path):
    """The package snippet, as written, after the quick start: its build makes the file its pip line
    installs, and the installed package loads by the name its last line uses."""
    import shlex
    import subprocess
    import sys

    block = re.search(r"To ship a pipeline.*?```bash\n(.*?)```", README.read_text(encoding="utf8"), flags=re.S).group(1)
    build, install, check = block.strip().splitlines()
    demo_model(tmp_path / "training" / "resume" / "demo" / "model-best")
    result = subprocess.run(build.replace("python ", f"{sys.executable} "), shell=True, cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    # Quiet: the model card's line and spaCy's package lines, not the build's log (spacy package: 70 more).
    printed = (result.stdout + result.stderr).strip().splitlines()
    assert len(printed) <= 16 and not any(line.startswith(("running ", "copying ")) for line in printed), printed
    sdist = shlex.split(install)[-1]
    assert (tmp_path / sdist).exists(), sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "packages").rglob("*"))
    # The model card written before the build is in the package's README.
    card = (tmp_path / "packages" / "zh_cner_resume-0.1.0" / "README.md").read_text(encoding="utf8")
    assert "### Entity labels" in card and "Resume NER (Zhang and Yang 2018)" in card
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", "--target", "site"]
    subprocess.run(pip + [sdist], check=True, cwd=tmp_path)
    code = shlex.split(check)[-1]
    result = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'site')\n" + code],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("(")


def bash_commands() -> list:
    """Every command of the README's bash snippets: continuation lines joined, comments dropped,
    `a && b` split."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf8"), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                commands += [part.strip() for part in line.split("&&")]
    return commands


def test_readme_select_snippet_runs_as_written(tmp_path):
    """The active-learning snippet, as written, after the quick start: two texts to label, for Label Studio."""
    import json
    import subprocess
    import sys

    block = re.search(r"## Active learning.*?```bash\n(.*?)```", README.read_text(encoding="utf8"), flags=re.S).group(1)
    demo_model(tmp_path / "training" / "resume" / "demo" / "model-best")
    script = block.replace("python ", f"{sys.executable} ")
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    tasks = json.loads((tmp_path / "next.json").read_text(encoding="utf8"))
    assert len(tasks) == 2 and all(task["data"]["text"] for task in tasks)


def test_readme_bash_commands_name_what_exists():
    """The README's other bash commands need the full data or a cluster: each names a project command
    or workflow that exists, a spacy_cner command that exists, and config overrides the config has."""
    import shlex

    import srsly
    import typer
    from spacy.util import load_config

    from spacy_cner.cli import app

    project = srsly.read_yaml(REPO_ROOT / "project.yml")
    runnable = {command["name"] for command in project["commands"]} | set(project["workflows"])
    cli_commands = set(typer.main.get_command(app).commands)
    checked = 0
    written = {}  # a config file that `init-config` wrote -> the shipped config it copied
    for command in bash_commands():
        words = shlex.split(command)
        if words[:4] == ["python", "-m", "spacy", "project"]:
            assert words[4] == "run" and words[5] in runnable, command
        elif words[:3] == ["python", "-m", "spacy_cner"]:
            assert words[3] in cli_commands, command
            if words[3] == "init-config":
                name = next((b for a, b in zip(words, words[1:]) if a in ("--config", "-c")), "default")
                written[words[4]] = f"configs/{name}.cfg"
        elif words[:4] == ["python", "-m", "spacy", "train"]:
            options = words[5:]
            overrides = {
                option[2:]: value for option, value in zip(options, options[1:])
                if option.startswith("--") and option != "--output"
            }
            # Every overridden setting is one the config has (confection would add a new key silently).
            config = load_config(REPO_ROOT / written.get(words[4], words[4]))
            for key in overrides:
                section = config
                for part in key.split("."):
                    assert isinstance(section, dict) and part in section, f"{command}: {key} is not in {words[4]}"
                    section = section[part]
        else:
            continue
        checked += 1
    assert checked >= 8
