"""Run the command-line interface: `python -m spacy_cner COMMAND ...`."""

from .cli import app

if __name__ == "__main__":
    app(prog_name="python -m spacy_cner")
