"""The README's and every docs/*.md page's Python snippets run, in order, page by page, as a reader
would run them after the quick start.

The quick start's model is stood in for by a tiny pipeline trained here and saved where the
demo writes its own (training/resume/demo/model-best). The bash snippets are commands of the
project and of spaCy that CI runs elsewhere (the test command) or that need the full data: each
names a command, option and config setting that exists.
"""

import re
from pathlib import Path

import pytest
import spacy
from spacy.training import Example
from thinc.api import fix_random_seed

from conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
PAGES = [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 150  # a first screen; the rest is in docs/
SENTENCE = "张三，男，1965年出生，现任北京大学光华管理学院教授。"
ENTITIES = [
    (SENTENCE.index(text), SENTENCE.index(text) + len(text), label)
    for text, label in (("张三", "NAME"), ("北京大学", "ORG"), ("光华管理学院", "ORG"), ("教授", "TITLE"))
]


def page_name(page: Path) -> str:
    return page.relative_to(REPO_ROOT).as_posix()


def python_snippets(page: Path = README) -> list:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf8"), flags=re.S)


def bash_block(heading: str) -> str:
    """The first bash block after `heading` on the one page that has it."""
    found = [page for page in PAGES if heading in page.read_text(encoding="utf8")]
    assert len(found) == 1, f"{heading!r} is on {[page_name(page) for page in found]}, not on one page"
    pattern = re.escape(heading) + r".*?```bash\n(.*?)```"
    return re.search(pattern, found[0].read_text(encoding="utf8"), flags=re.S).group(1)


def demo_model(path: Path) -> None:
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {
        "@architectures": "spacy-cner.CRFTagger.v1",
        "tok2vec": {
            "@architectures": "spacy-cner.CharBigramEmbed.v1",
            "width": 32,
            "char_rows": 500,
            "bigram_rows": 500,
            "bigram_dropout": 0.0,
        },
        "encoder": {"@layers": "spacy-cner.BiLSTMEncoder.v1", "width": 32, "dropout": 0.0},
    }
    nlp.add_pipe("crf_ner", config={"model": model})
    examples = [Example.from_dict(nlp.make_doc(SENTENCE), {"entities": ENTITIES})]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    path.parent.mkdir(parents=True)
    nlp.to_disk(path)


# What a page's snippets print, where a reader is told what to expect.
PRINTED = {
    "README.md": ["('张三', 'NAME', "],  # the entities of the first snippet, with their probabilities
    "docs/probabilities.md": ["北京大学\tORG\t"],  # the scored spans
    "docs/annotate.md": ['{"text": "张三，现任北京大学教授。", "entities": ['],  # annotate's first row
}


def test_every_python_snippet_is_run():
    pages = {page_name(page) for page in PAGES if python_snippets(page)}
    assert {"README.md", *PRINTED} <= pages
    assert sum(len(python_snippets(page)) for page in PAGES) >= 6


@pytest.mark.parametrize("page", [page_name(page) for page in PAGES if python_snippets(page)])
def test_python_snippets_run(page, tmp_path, monkeypatch, capsys):
    """Each page's snippets run in order in one namespace of their own (a page does not lean on another's)."""
    snippets = python_snippets(REPO_ROOT / page)
    demo_model(tmp_path / "training" / "resume" / "demo" / "model-best")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, snippet in enumerate(snippets):
        try:
            exec(compile(snippet, f"{page} python snippet {i + 1}", "exec"), namespace)
        except Exception as error:  # pragma: no cover - the message says which snippet
            raise AssertionError(f"{page} python snippet {i + 1} failed: {error!r}\n{snippet}") from error
    printed = capsys.readouterr().out
    for expected in PRINTED.get(page, []):
        assert expected in printed, (page, expected, printed[-2000:])
    # Following the docs leaves nothing in the folder but under outputs/ (git-ignored), beside the model.
    assert {path.name for path in tmp_path.iterdir()} <= {"outputs", "training"}, page


def test_readme_is_a_first_screen():
    """The README stays short, and a newcomer's two commands come first: the demo, then the tests."""
    text = README.read_text(encoding="utf8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move sections to docs/"
    demo = next(i for i, line in enumerate(lines) if "python -m spacy project run demo" in line)
    marker = next(i for i, line in enumerate(lines) if line.startswith("<!-- test-command"))
    assert demo < marker < 60 and "python -m pytest" in lines[marker + 2], lines[marker : marker + 3]


def anchors(page: Path) -> set:
    """A Markdown page's anchors: its `<a id>`s and its headings as GitHub slugs them."""
    text = page.read_text(encoding="utf8")
    slugs = {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.*)$", text, flags=re.M)
    }
    return slugs | set(re.findall(r'<a id="([^"]+)">', text))


def test_links_point_to_files_that_exist():
    """Every relative link of the README and docs/ names a file or folder of the repository, and an anchor
    of a Markdown page one that page has (BENCHMARKS.md's sections: their keys in bench/questions.toml)."""
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf8")):
            path, _, anchor = target.partition("#")
            if re.match(r"[a-z]+:", path):
                continue
            linked = page.parent / path if path else page
            if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
                broken.append(f"{page_name(page)}: {target}")
    # Paths named in code spans: a module, script or config that moved leaves its old name here.
    for page in PAGES:
        for path in re.findall(r"`((?:spacy_cner|bench|tests|configs)/[^`\s<>*]+)`", page.read_text(encoding="utf8")):
            if not (REPO_ROOT / path).exists():
                broken.append(f"{page_name(page)}: `{path}`")
    assert not broken, broken
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", README.read_text(encoding="utf8")))
    assert {page_name(page) for page in PAGES[1:]} <= linked, "a docs/ page the README does not link to"


def test_readme_package_snippet_installs_what_it_builds(tmp_path):
    """The package snippet, as written, after the quick start: its build makes the file its pip line
    installs, and the installed package loads by the name its last line uses."""
    import shlex
    import subprocess
    import sys

    block = bash_block("To ship a pipeline")
    build, install, check = block.strip().splitlines()
    demo_model(tmp_path / "training" / "resume" / "demo" / "model-best")
    result = subprocess.run(
        build.replace("python ", f"{sys.executable} "), shell=True, cwd=tmp_path, capture_output=True, text=True
    )
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
    result = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, 'site')\n" + code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("(")


def bash_commands() -> list:
    """Every command of the README's and docs/'s bash snippets: continuation lines joined, comments
    dropped, `a && b` split."""
    commands = []
    text = "\n".join(page.read_text(encoding="utf8") for page in PAGES)
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
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

    block = bash_block("## Active learning")
    demo_model(tmp_path / "training" / "resume" / "demo" / "model-best")
    script = block.replace("python ", f"{sys.executable} ")
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    tasks = json.loads((tmp_path / "outputs" / "next.json").read_text(encoding="utf8"))
    assert len(tasks) == 2 and all(task["data"]["text"] for task in tasks)
    # Nothing left in the folder it ran in but under outputs/ (git-ignored), beside the model it read.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["outputs", "training"]


def test_readme_bash_commands_name_what_exists():
    """The README's and docs/'s other bash commands need the full data or a cluster: each names a project
    command or workflow that exists, a spacy_cner command that exists with the options it is given, and
    config overrides the config has."""
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
        words = shlex.split(command, comments=True)  # a trailing `# ...` is a comment, as in bash
        if words[:4] == ["python", "-m", "spacy", "project"]:
            assert words[4] == "run" and words[5] in runnable, command
        elif words[:3] == ["python", "-m", "spacy_cner"]:
            assert words[3] in cli_commands, command
            cli_command, arguments = typer.main.get_command(app).commands[words[3]], words[4:]
            if hasattr(cli_command, "commands"):  # a group: `pretrained fetch`
                assert words[4] in cli_command.commands, command
                cli_command, arguments = cli_command.commands[words[4]], words[5:]
            if not cli_command.context_settings.get("ignore_unknown_options"):  # not spaCy's pass-through
                options = {opt for param in cli_command.params for opt in param.opts + param.secondary_opts}
                unknown = [word for word in arguments if word.startswith("-") and word.split("=")[0] not in options]
                assert not unknown, f"{command}: {unknown} are not options of {words[3]}"
            if words[3] == "init-config":
                name = next((b for a, b in zip(words, words[1:]) if a in ("--config", "-c")), "default")
                written[words[4]] = f"configs/{name}.cfg"
        elif words[:4] == ["python", "-m", "spacy", "train"]:
            options = words[5:]
            overrides = {
                option[2:]: value
                for option, value in zip(options, options[1:])
                if option.startswith("--") and option not in ("--output", "--gpu-id", "--code")  # spacy train's own
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


def test_config_snippets_name_registered_functions():
    """Every ini snippet of the README and docs/ parses as a config, and every function it names
    (`@architectures`, `@layers`, `@misc`, `@scorers`, ...) is registered."""
    from confection import Config
    from spacy.util import registry

    def names(section):
        for key, value in section.items():
            if isinstance(value, dict):
                yield from names(value)
            elif key.startswith("@"):
                yield key[1:], value

    checked = 0
    for page in PAGES:
        for i, block in enumerate(re.findall(r"```ini\n(.*?)```", page.read_text(encoding="utf8"), flags=re.S)):
            # A snippet shows its own sections only: their parents are added, empty, so that it parses.
            headers = re.findall(r"^\[([^\]]+)\]$", block, flags=re.M)
            parents = {".".join(h.split(".")[:n]) for h in headers for n in range(1, h.count(".") + 1)}
            block = "".join(f"[{parent}]\n" for parent in sorted(parents - set(headers))) + block
            config = Config().from_str(block, interpolate=False)
            for registry_name, function in names(config):
                assert registry.has(registry_name, function), f"{page_name(page)} ini snippet {i + 1}: {function}"
                checked += 1
    assert checked >= 8


def test_readme_recipe_runs_as_written(tmp_path, toy_vectors):
    """The README's train-on-your-own-data recipe, as written, on the toy corpus in `char tag` files: convert,
    train configs/default.cfg (shrunk, cut to a few steps and given toy vectors instead of fetching LAC's: the
    only words added), evaluate, show-ents."""
    import shutil
    import subprocess
    import sys

    from conftest import SMALL_CONFIG_OVERRIDES, TRAIN_DATA
    from spacy_cner.tags import spans_to_tags

    (tmp_path / "mydata").mkdir()
    for split, data in (("train", TRAIN_DATA * 2), ("dev", TRAIN_DATA), ("test", TRAIN_DATA)):
        sentences = [
            "\n".join(f"{char} {tag}" for char, tag in zip(text, spans_to_tags(ents, len(text), "BIOES")))
            for text, ents in data
        ]
        (tmp_path / "mydata" / f"{split}.txt").write_text("\n\n".join(sentences) + "\n", encoding="utf8")
    shutil.copytree(REPO_ROOT / "configs", tmp_path / "configs")
    small = {
        **SMALL_CONFIG_OVERRIDES["pretrain_free"],
        "training.max_steps": 10,
        "training.eval_frequency": 5,
        "paths.vectors": toy_vectors,
    }
    printed = ""
    for command in bash_block("## Training on your own data").strip().splitlines():
        if command.startswith("python -m spacy train"):
            command += "".join(f" --{key} {value}" for key, value in small.items())
        command = command.replace("python ", f"{sys.executable} ", 1)
        result = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 0, command + "\n" + result.stdout[-2000:] + result.stderr[-2000:]
        printed += result.stdout
    assert (tmp_path / "training" / "mine" / "model-best").is_dir()
    assert "NER F" in printed and "张三，现任北京大学教授。" in printed  # evaluate's scores, show-ents' text
