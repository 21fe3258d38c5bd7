"""Moved to spacy_cner.training.shipped_configs (the training configs shipped with the package); this module keeps
the old import path for one release (CHANGELOG.md)."""

from .training.shipped_configs import CONFIG_DIR, config_names, config_path  # noqa: F401
