#!/usr/bin/env bash
# Build .gpusite/ for a run of the GPU checks on a lent device machine (the tool library's `device`).
#
# The device's image has torch, CuPy and pytest but not spaCy, thinc, spacy-transformers (nor the
# transformers < 4.50 they need), pytorch-crf, jieba or rjieba, and it cannot reach PyPI. This
# downloads those as CPython 3.12 wheels, unpacks them, strips their shared libraries and packs one
# .tar.xz under 64 MiB (the carry limit), beside a copy of Resume (../shared does not travel).
# Then, in one `run` with carry [".gpusite"] (the 2026-11-26 run took 4.5 min of device time):
#   mkdir -p /tmp/site && tar xJf .gpusite/site.tar.xz -C /tmp/site && export PYTHONPATH=/tmp/site &&
#   python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . &&
#   python3 -m pytest -m gpu tests/test_gpu.py -rs &&
#   python3 bench/bench_gpu.py --data .gpusite/data/resume --out /tmp/gpurun; cp /tmp/gpurun/*.log /tmp/gpurun/*.json bench/results/gpu.json $OUT/
# Unpacking and installing take 7 s, the GPU tests about 50 s. bench_gpu's six runs do not fit one
# 10-minute call: the second session (2026-11-26) started it with `setsid nohup ... &`, waited inside
# the first call until 555 s, and collected /tmp/gpurun/partial_results.json in a second call made at
# once (a machine idle for 30 s is given back). One run of 100 steps with --evals 2 --cpu-repeats 1
# took 2-3.5 min (training, the GPU pass, the CPU pass); 15 minutes of device time hold about four.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gpusite/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.gpusite/ >> .git/info/exclude; }
work=$(mktemp -d)
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
    platforms+=(--platform "${tag}_x86_64")
done
python -m pip download -q --only-binary=:all: --no-deps --python-version 3.12 --implementation cp "${platforms[@]}" \
    -d "$work/wheels" spacy==3.8.18 spacy-legacy spacy-loggers thinc==8.3.14 blis srsly murmurhash cymem preshed \
    wasabi catalogue weasel confection cloudpathlib smart-open pydantic pydantic-core annotated-types \
    typing-inspection spacy-transformers==1.3.9 spacy-alignments transformers==4.49.0 tokenizers==0.21.4 \
    huggingface-hub==0.36.2 pytorch-crf==0.7.2 rjieba==0.2.2
python -m pip wheel -q --no-deps -w "$work/wheels" jieba==0.42.1  # an sdist only: built here, pure Python
mkdir -p "$work/site"
for wheel in "$work"/wheels/*.whl; do python -m zipfile -e "$wheel" "$work/site"; done
find "$work/site" -name "*.so" -exec strip --strip-unneeded {} \;
rm -f "$work/site/jieba/analyse/idf.txt"  # keyword extraction's table: spacy_cner does not use it
mkdir -p .gpusite/data
tar cJf .gpusite/site.tar.xz -C "$work/site" .
cp -r ../shared/data/resume .gpusite/data/
rm -rf "$work"
du -sh .gpusite
