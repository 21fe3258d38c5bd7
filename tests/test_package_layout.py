"""The package's layout: real modules only (no shim re-exporting moved names), and no import upward from the
layers (docs/code_map.md, "When code moves")."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spacy_cner"
MODULES = sorted(path for path in PACKAGE.rglob("*.py") if path.name not in ("__init__.py", "__main__.py"))


def _only_reexports(tree: ast.Module) -> bool:
    """Whether a module's body is only a docstring, imports and __all__: a shim."""
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            continue
        return False
    return True


def _imported_modules(path: Path) -> set:
    """The spacy_cner modules a file imports, as dotted names."""
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names.add(".".join([*base, *([node.module] if node.module else [])]))
            elif node.module:
                names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.split(".")[0] == "spacy_cner"}


def test_the_package_holds_only_real_modules():
    """A module that only re-exports another's names is a shim: none until a tagged release shipped a path."""
    shims = [str(p.relative_to(PACKAGE.parent)) for p in MODULES if _only_reexports(ast.parse(p.read_text("utf8")))]
    assert shims == []


def test_the_shim_check_finds_a_shim():
    assert _only_reexports(ast.parse('"""Moved."""\nfrom .a import b  # noqa: F401\n__all__ = ["b"]\n'))
    assert not _only_reexports(ast.parse("from .a import b\n\ndef c():\n    return b\n"))


@pytest.mark.parametrize("floor", ["backends", "layers"])
def test_backends_and_layers_import_nothing_above_them(floor):
    """The layers are below the pipe, training, the tools and robustness/ (whose cs/cl fixes are layers now)."""
    above = tuple(f"spacy_cner.{name}" for name in ("pipeline", "training", "annotate", "robustness", "cli", "serve"))
    upward = {
        str(path.relative_to(PACKAGE.parent)): sorted(n for n in _imported_modules(path) if n.startswith(above))
        for path in (PACKAGE / floor).rglob("*.py")
    }
    assert {path: names for path, names in upward.items() if names} == {}


def test_the_modules_mypy_skips_exist():
    """pyproject.toml's list of modules mypy does not check yet names modules that exist: a module moved or
    renamed leaves the list (and is checked), rather than leaving a name that silently matches nothing."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml needs tomllib (3.11) or tomli")
    settings = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf8"))["tool"]["mypy"]
    skipped = [name for override in settings["overrides"] for name in override["module"]]
    assert skipped == sorted(set(skipped))
    missing = [
        name
        for name in skipped
        if not (PACKAGE.parent / (name.replace(".", "/") + ".py")).exists()
        and not (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()
    ]
    assert missing == []
