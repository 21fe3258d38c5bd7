"""Milliseconds of two training-step kernels: the BiLSTM's dropout and the CRF's forward-backward.

Usage: python bench/bench_kernels.py [--repeats 20] [--result NAME]

Times, in this process on one thread: torch.nn.Dropout(0.5) and spacy_cner's Dropout(0.5) on a
(30, 50, 256) float32 tensor in training mode; scaled_forward_backward on a float64 batch of 80
docs of 20-150 steps and 33 tags (Resume's BIOES tag set). To compare with an older checkout, run
it with that checkout first on the path: `PYTHONPATH=/tmp/old python bench/bench_kernels.py --result kernels_old`
(this file only imports what both have; the result's commit is this checkout's, the table names the other).
"""
import os

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from _common import Section, add_result_argument, save_result  # noqa: E402


def best_ms(function, repeats: int) -> float:
    """The fastest of `repeats` calls, in milliseconds, after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    add_result_argument(parser, "kernels")
    args = parser.parse_args()
    import spacy_cner.layers._torch as torch_helpers
    from spacy_cner.layers.forward_backward import scaled_forward_backward

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(30, 50, 256)
    source = os.path.dirname(torch_helpers.__file__)
    print(f"spacy_cner from {source}")
    ms = {"torch.nn.Dropout(0.5), (30, 50, 256)": best_ms(lambda: torch.nn.Dropout(0.5).train()(x), args.repeats)}
    if hasattr(torch_helpers, "Dropout"):
        ours = torch_helpers.Dropout(0.5).train()
        ms["spacy_cner Dropout(0.5), (30, 50, 256)"] = best_ms(lambda: ours(x), args.repeats)
    n_docs, n_steps, n_tags = 80, 150, 33
    emit = torch.randn(n_docs, n_steps, n_tags, dtype=torch.float64) * 3
    lengths = torch.randint(20, n_steps + 1, (n_docs,))
    lengths[0] = n_steps
    mask = torch.arange(n_steps)[None] < lengths[:, None]
    scores = [torch.randn(*shape, dtype=torch.float64) for shape in ((n_tags, n_tags), (n_tags,), (n_tags,))]
    name = f"CRF scaled_forward_backward, {n_docs} docs x {n_steps} steps x {n_tags} tags"
    ms[name] = best_ms(lambda: scaled_forward_backward(emit, mask, *scores), args.repeats)
    for kernel, value in ms.items():
        print(f"{kernel}: {value:.2f} ms")
    section = Section("Training-step kernels",
                      f"One thread, best of {args.repeats} after a warm-up call; spacy_cner from {source}.",
                      [[{"kernel": kernel, "ms": round(value, 2)} for kernel, value in ms.items()]])
    print(section.markdown())
    save_result(args.result, {"ms": ms, "spacy_cner_from": source}, section)


if __name__ == "__main__":
    main()
