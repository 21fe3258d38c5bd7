"""The trainable pipe `crf_ner` (crf_ner.py holds its TrainablePipe contract) and the modules beside it.

They take what they need as arguments and never import the pipe: decoding (emission scores, best paths, entity
probabilities), calibration (temperature and threshold fitted on dev), alignment (a character model on longer
tokens), optimizer, resize (labels added after initialize), lexicons, serialization and file_errors (the saved
files), checks (the settings and inputs it refuses).
"""
