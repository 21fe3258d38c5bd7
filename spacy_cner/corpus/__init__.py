"""Corpora in and out: one module per format or annotation tool, reading and writing it (chars.py,
cluener.py, doccano.py, prodigy.py, labelstudio.py), formats.py the one table of them; files read
into Docs (`convert`), Docs written back (`export`)."""
