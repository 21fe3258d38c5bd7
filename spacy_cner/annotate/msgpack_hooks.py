"""The one place annotate patches a library: srsly's msgpack registries, looked up once per block.

Why a patch and not a local encoder: the packing happens inside spaCy (Doc.to_bytes in nlp.pipe's
workers, Doc.from_bytes in the main process), which calls srsly.msgpack_dumps / msgpack_loads with
no way to pass encoders or decoders; srsly looks them up in its registries on every call. So the
registries' lookup is what has to change, for the block only, and it is restored after.
"""

import contextlib
from typing import Iterator

import srsly


@contextlib.contextmanager
def msgpack_hooks_looked_up_once() -> Iterator[None]:
    """srsly's msgpack hooks looked up once for the block, then srsly's lookup restored.

    srsly finds its msgpack encoders and decoders in catalogue on every packb/unpackb: a scan of the
    installed entry points and of every registered function, milliseconds once a pipeline is loaded.
    nlp.pipe(n_process > 1) packs each doc three times in a worker and unpacks it three times in the
    main process, which made `--n-process 2` slower than one process on short docs
    (BENCHMARKS.md#annotate). Inside the block the hooks are the ones registered when it starts; workers
    forked inside it inherit them (under the spawn and forkserver start methods, forkserver being
    Python 3.14's default on Linux, they look them up as before: correct, only slower). Blocks
    nest: each restores what was there when it began.
    """
    registries = (srsly.msgpack_encoders, srsly.msgpack_decoders)
    before = [vars(registry).get("get_all") for registry in registries]
    for registry in registries:
        hooks = registry.get_all()
        registry.get_all = lambda hooks=hooks: dict(hooks)
    try:
        yield
    finally:
        for registry, get_all in zip(registries, before):
            del registry.get_all
            if get_all is not None:
                registry.get_all = get_all
