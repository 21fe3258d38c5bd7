"""int8 and bfloat16 for the default's two large products against fp32: time and batch independence.

Usage: python bench/bench_int8.py [--repeats 20] [--result NAME]

The default's encoder is two unidirectional torch LSTMs of 128 units over 128-wide inputs
(BiLSTMEncoder width 256); its tok2vec mixes about 370 features into 3 x 128 (Maxout). On one
thread, this times one direction's LSTM over a padded batch (64 docs of 50 tokens, as nlp.pipe
batches Resume's sentences) and the Maxout's product over a block of 512 rows, in fp32, after
torch.ao.quantization.quantize_dynamic(..., qint8), and in bfloat16 (weights and inputs; CPUs with
AMX or AVX512-BF16 run it natively, others emulate it), best of --repeats, alternating; and checks
whether the first row's outputs are the same alone and in the batch (dynamic quantization scales
each input tensor by its own range, so a doc's result can depend on its batch) and how far each is
from fp32.
"""

from _common import Section, add_result_argument, publish, single_thread

single_thread()  # before numpy and torch are imported: their thread pools read the setting once

import argparse  # noqa: E402
import copy  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    add_result_argument(parser, "int8")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(128, 128, batch_first=True).eval()
    # The tok2vec's Maxout: 370 features -> 3 pieces of 128 (RowwiseOps' block of 512 rows).
    linear = torch.nn.Linear(370, 384).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated in torch 2.13
        modules = {
            "lstm": {
                "fp32": lstm,
                "bf16": copy.deepcopy(lstm).to(torch.bfloat16),
                "int8": torch.ao.quantization.quantize_dynamic(
                    torch.nn.Sequential(lstm), {torch.nn.LSTM}, dtype=torch.qint8
                )[0],
            },
            "linear": {
                "fp32": linear,
                "bf16": copy.deepcopy(linear).to(torch.bfloat16),
                "int8": torch.ao.quantization.quantize_dynamic(
                    torch.nn.Sequential(linear), {torch.nn.Linear}, dtype=torch.qint8
                )[0],
            },
        }
    inputs = {"lstm": torch.randn(64, 50, 128), "linear": torch.randn(512, 370)}

    def run(layer: str, name: str, x: torch.Tensor) -> torch.Tensor:
        out = modules[layer][name](x.to(torch.bfloat16) if name == "bf16" else x)
        return (out[0] if layer == "lstm" else out).float()

    seconds = {(layer, name): [] for layer in modules for name in modules[layer]}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for layer, name in seconds:
            run(layer, name, inputs[layer])
        for _ in range(args.repeats):
            for layer, name in seconds:
                start = time.perf_counter()
                run(layer, name, inputs[layer])
                seconds[layer, name].append(time.perf_counter() - start)
        alone = {
            key: float((run(*key, inputs[key[0]])[:1] - run(*key, inputs[key[0]][:1])).abs().max()) for key in seconds
        }
        gap = {
            key: float((run(*key, inputs[key[0]]) - run(key[0], "fp32", inputs[key[0]])).abs().max()) for key in seconds
        }
    best = {key: min(times) * 1000 for key, times in seconds.items()}
    # torch.cpu's private probes (torch 2.13): None where this torch lacks them.
    probe = {name: getattr(torch.cpu, f"_is_{name}_supported", None) for name in ("amx_tile", "avx512_bf16", "vnni")}
    cpu = {
        "capability": torch.backends.cpu.get_cpu_capability(),
        **{name: (bool(check()) if check is not None else None) for name, check in probe.items()},
    }
    said = {True: "yes", False: "no", None: "unknown"}
    shapes = {
        "lstm": "one direction of the default's BiLSTM (LSTM 128 -> 128), 64 docs x 50 tokens",
        "linear": "the tok2vec's Maxout product (370 -> 384), a block of 512 rows",
    }
    notes = (
        f"torch {torch.__version__}, CPU capability {cpu['capability']}, AMX {said[cpu['amx_tile']]}, "
        f"AVX512-BF16 {said[cpu['avx512_bf16']]}, VNNI {said[cpu['vnni']]}. One thread, best of {args.repeats}, "
        "alternating. int8: torch.ao.quantization.quantize_dynamic; bf16: weights and inputs in bfloat16."
    )
    rows = [
        {
            "product": shapes[layer],
            "precision": name,
            "ms": round(best[layer, name], 2),
            "time / fp32": round(best[layer, name] / best[layer, "fp32"], 2),
            "first row alone against in the batch: largest difference": float(f"{alone[layer, name]:.1e}"),
            "largest difference from fp32": float(f"{gap[layer, name]:.1e}"),
        }
        for layer, name in seconds
    ]
    figures = {
        "ms": {f"{layer} {name}": value for (layer, name), value in best.items()},
        "over_fp32_time": {f"{layer} {name}": best[layer, name] / best[layer, "fp32"] for layer, name in best},
        "first_row_alone_vs_batch": {f"{layer} {name}": value for (layer, name), value in alone.items()},
        "largest_difference_from_fp32": {f"{layer} {name}": value for (layer, name), value in gap.items()},
        "cpu": cpu,
        "torch": torch.__version__,
    }
    publish(args.result, figures, Section("int8 and bfloat16 against fp32 for the default's products", notes, [rows]))


if __name__ == "__main__":
    main()
