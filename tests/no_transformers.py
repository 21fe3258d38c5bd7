"""An environment for subprocesses in which spacy-transformers and transformers are not installed, as on the
README's install (no extras): a sitecustomize module on PYTHONPATH, read by the subprocess and by any process it
starts (`spacy package`'s build), puts a finder first on sys.meta_path that refuses to import both, and leaves
their distributions out of importlib.metadata (so their entry points, spacy-transformers' architectures among
them, are gone too)."""

import os
from pathlib import Path
from typing import Dict

HIDDEN = ("spacy_transformers", "transformers")

SITECUSTOMIZE = f'''import importlib.machinery
import sys


class _NotInstalled:
    """Finds {HIDDEN} as if they were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HIDDEN!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
_find_distributions = importlib.machinery.PathFinder.find_distributions


def _installed_distributions(*args, **kwargs):
    for distribution in _find_distributions(*args, **kwargs):
        folder = getattr(distribution, "_path", None)  # NAME-VERSION.dist-info
        name = folder.name.split("-")[0] if folder is not None else distribution.metadata["Name"] or ""
        if name.lower().replace("-", "_") not in {HIDDEN!r}:
            yield distribution


importlib.machinery.PathFinder.find_distributions = staticmethod(_installed_distributions)
'''


def env_without_transformers(folder: Path) -> Dict[str, str]:
    """os.environ with PYTHONPATH starting at `folder`, where the hiding sitecustomize.py is written."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf8")
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}
