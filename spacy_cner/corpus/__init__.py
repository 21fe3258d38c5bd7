"""Corpora in and out: annotation formats read into Docs (`convert`), Docs written back (`export`)."""
