"""Run the command-line interface: `python -m spacy_cner COMMAND ...` (or the `spacy-cner` console script)."""

from .cli._app import run

if __name__ == "__main__":
    run(prog_name="python -m spacy_cner")
