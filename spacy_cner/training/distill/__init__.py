"""Distillation (issue 58): a small `crf_ner` (the student) learns a trained `crf_ner`'s (the teacher's)
distribution over tag sequences, on the train split and on as much unlabeled text as there is.

Where each part is:
- loss.py: the soft targets (SoftTargets, Pieces) and the teacher-student loss, sequence-level KL at a
  temperature (the pipe's get_teacher_student_loss calls it; the only module the pipe imports);
- teacher.py: the teacher's side: its soft targets (layers.crf_posteriors.chain_posteriors), the
  `crf_ner_soft_targets` step that annotate's engine runs, their records in the shards, the teacher folder;
- corpus.py: spacy-cner.distill_corpus.v1, the shards as training Examples (a long doc as its windows);
- run.py: distill, the teacher pass then the student trained by spaCy's own loop, and its checks.

Importing this package registers the `crf_ner_soft_targets` factory and the corpus reader (setup.cfg's
entry points name them here).
"""

from .corpus import create_distill_corpus
from .loss import SOFT_TARGETS, Pieces, SoftTargets, pieces_of, product_counts, soft_targets, teacher_student_loss
from .run import DistillSummary, check_unlabeled_texts, distill, evaluation_within, warn_if_untrained_best
from .teacher import (
    GOLD_INDEX,
    TEACHER_INPUTS,
    TEACHER_META,
    TEACHER_PIPELINE,
    TEACHER_SHARDS,
    SoftTargetsWriter,
    chain_soft_targets,
    make_soft_targets,
    prepare_teacher,
    read_soft_targets,
    soft_targets_record,
    teacher_soft_targets,
    write_teacher_inputs,
)

__all__ = [
    "SOFT_TARGETS",
    "GOLD_INDEX",
    "TEACHER_META",
    "TEACHER_PIPELINE",
    "TEACHER_INPUTS",
    "TEACHER_SHARDS",
    "SoftTargets",
    "Pieces",
    "pieces_of",
    "soft_targets",
    "teacher_student_loss",
    "product_counts",
    "teacher_soft_targets",
    "chain_soft_targets",
    "soft_targets_record",
    "read_soft_targets",
    "make_soft_targets",
    "SoftTargetsWriter",
    "prepare_teacher",
    "write_teacher_inputs",
    "create_distill_corpus",
    "DistillSummary",
    "distill",
    "evaluation_within",
    "warn_if_untrained_best",
    "check_unlabeled_texts",
]
