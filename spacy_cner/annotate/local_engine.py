"""The local engine: every pending row through one nlp.pipe call in this process (so its n_process
workers start once), the annotated rows written into shards in input order.

Its forked workers end with the annotating process, even one killed with SIGKILL (Linux's
PR_SET_PDEATHSIG, set at fork by the hooks this module registers).
"""

import contextlib
import os
import sys
import time
from typing import Iterator, List, Tuple

from .inputs import Row, Source, read_rows
from .job import AnnotateJob
from .msgpack_hooks import msgpack_hooks_looked_up_once
from .outputs import ShardWriter
from .records import doc_record, error_record, pipe_rows, scores_key, set_uncertainty

# Whether a process forked now (nlp.pipe's n_process workers) should end when its parent does.
_DIE_WITH_PARENT = False
# prctl(PR_SET_PDEATHSIG, signal): the signal Linux sends a process when its parent ends.
_PR_SET_PDEATHSIG = 1
# The pid of the process that is forking (read by the child).
_FORKING_PID = 0


def annotate_local(job: AnnotateJob, sources: List[Source], writer: ShardWriter) -> None:
    """Annotate the sources with nlp.pipe (job.batch_size, job.n_process, job.gpu_id), skipping what
    the writer finds written."""
    import spacy
    from ..backends.devices import setup_gpu

    setup_gpu(job.gpu_id, silent=True)
    start = time.perf_counter()
    try:
        nlp = spacy.load(job.model)
    except OSError as err:  # a mistyped path or package name: one line, not a traceback
        raise ValueError(f"Cannot load the pipeline {job.model!r}: {err}") from None
    writer.summary.load_seconds = time.perf_counter() - start
    set_uncertainty(nlp, job.uncertainty, job.uncertainty_seed)
    spans_key = scores_key(nlp)

    def pending() -> Iterator[Tuple[Row, Tuple[Source, int, bool]]]:
        for source in sources:
            if writer.skip_complete(source):
                continue
            writer.begin(source)
            n_rows = 0
            for n_rows, row in enumerate(read_rows(source, job.entities_field, job.text_field), start=1):
                if not writer.skip_written(source, n_rows - 1):
                    yield row, (source, n_rows - 1, False)
            # An end-of-source marker row travels through nlp.pipe in order, so the source is
            # marked complete only once its last shard is written.
            yield Row({}, error="end"), (source, n_rows, True)

    with msgpack_hooks_looked_up_once(), workers_die_with_parent():
        rows = pipe_rows(nlp, pending(), batch_size=job.batch_size, n_process=job.n_process)
        for row, (source, index, end), doc in rows:
            if end:
                writer.complete(source, index)
            elif writer.output_format == "spacy":
                writer.add_doc(source, index, row, doc if doc is not None else nlp.make_doc(""))
            elif doc is not None:
                writer.add(source, index, doc_record(doc, row, job.entities_field, spans_key), len(row.text))
            else:
                writer.add(source, index, error_record(row, source.where(index)), len(row.text))


@contextlib.contextmanager
def workers_die_with_parent() -> Iterator[None]:
    """Within this block, a forked worker (nlp.pipe's n_process) gets SIGTERM when the annotating
    process ends, even killed with SIGKILL (Linux's PR_SET_PDEATHSIG; elsewhere nothing changes).

    Why: spaCy's workers wait on their queues for more texts; a parent killed by a signal (a
    cluster's preemption, an out-of-memory kill) left them running, holding their memory.
    """
    global _DIE_WITH_PARENT
    previous, _DIE_WITH_PARENT = _DIE_WITH_PARENT, True
    try:
        yield
    finally:
        _DIE_WITH_PARENT = previous


def _note_forking_pid() -> None:
    global _FORKING_PID
    _FORKING_PID = os.getpid()


def _set_death_signal() -> None:
    if not (_DIE_WITH_PARENT and sys.platform.startswith("linux")):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the workers behave as before
        return
    if os.getppid() != _FORKING_PID:  # the parent ended between the fork and prctl
        os._exit(1)


os.register_at_fork(before=_note_forking_pid, after_in_child=_set_death_signal)
