"""The package's version: the one place it is written (setup.cfg reads it; the package root and the ready
pipeline's meta import it)."""

__version__ = "0.1.0"
