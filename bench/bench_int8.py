"""int8 for the default's BiLSTM: torch's dynamic quantization against fp32, time and batch independence.

Usage: python bench/bench_int8.py [--repeats 20] [--result NAME]

The default's encoder is two unidirectional torch LSTMs of 128 units over 128-wide inputs
(BiLSTMEncoder width 256). On one thread, this times one direction's LSTM over a padded batch
(64 docs of 50 tokens, as nlp.pipe batches Resume's sentences) in fp32 and after
torch.ao.quantization.quantize_dynamic(..., {LSTM}, qint8), best of --repeats, alternating; and
checks whether the first doc's outputs are the same alone and in the batch (dynamic
quantization scales each input tensor by its own range, so a doc's result can depend on its batch)
and how far int8 is from fp32.
"""
import os

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from _common import add_result_argument, machine_line, save_result  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    add_result_argument(parser, "int8")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    fp32 = torch.nn.LSTM(128, 128, batch_first=True).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated in torch 2.13
        int8 = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(fp32), {torch.nn.LSTM}, dtype=torch.qint8)[0]
    batch = torch.randn(64, 50, 128)
    seconds = {"fp32": [], "int8": []}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module in (fp32, int8):
            module(batch)
        for _ in range(args.repeats):
            for name, module in (("fp32", fp32), ("int8", int8)):
                start = time.perf_counter()
                module(batch)
                seconds[name].append(time.perf_counter() - start)
        alone = {name: float((module(batch)[0][:1] - module(batch[:1])[0]).abs().max())
                 for name, module in (("fp32", fp32), ("int8", int8))}
        gap = float((int8(batch)[0] - fp32(batch)[0]).abs().max())
    best = {name: min(times) * 1000 for name, times in seconds.items()}
    lines = [
        f"### int8 BiLSTM, torch dynamic quantization ({datetime.date.today().isoformat()})",
        "",
        f"Command: `python bench/bench_int8.py {' '.join(sys.argv[1:])}`  ",
        f"Machine: {machine_line()}, torch {torch.__version__}  ",
        "One direction of the default's BiLSTM (LSTM 128 -> 128) over 64 docs x 50 tokens, one thread, "
        f"best of {args.repeats}, alternating.",
        "",
        "| | ms per batch | first doc alone against in the batch: largest difference |",
        "| --- | ---: | ---: |",
        f"| fp32 | {best['fp32']:.1f} | {alone['fp32']:.1e} |",
        f"| int8 (quantize_dynamic) | {best['int8']:.1f} | {alone['int8']:.1e} |",
        "",
        f"int8 / fp32 time: {best['int8'] / best['fp32']:.2f}; largest output difference int8 - fp32: {gap:.3f}.",
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    figures = {"ms_per_batch": best, "first_doc_alone_vs_batch": alone, "int8_fp32_largest_difference": gap,
               "int8_over_fp32_time": best["int8"] / best["fp32"], "torch": torch.__version__}
    save_result(args.result, figures, table)


if __name__ == "__main__":
    main()
