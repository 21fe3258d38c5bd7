#!/usr/bin/env bash
# One device call for the GPU issue, all of its parts at once: bench/gpu_workflow.sh on the GPU (pytest -m gpu,
# project.yml's transformer workflow, the distillation route) and, beside it on the device's idle CPU cores,
# bench/bench_slow_start.py's runs (the issue's item 2: which piece delays NEZHA-BiLSTM-CRF + DF + FGM's start),
# one process per system or variant, one thread each. The device brings back 8 files at most, so every 20 s
# everything written so far is packed into $OUT/results.tar.gz (replaced atomically): a call cut off at its
# limit still returns what finished, the slow-start runs' train.log curves included.
#
# On the device machine (`run` with carry [".gpusite"] from bench/gpu_carry.sh, timeout_s 600):
#   CODE_COMMIT=<commit> bash bench/gpu_session.sh
# Here (the CPU dry run, tiny sizes; minutes on 2 cores):
#   OUT=$(mktemp -d) GPU_ID=-1 TINY=1 SLOW_STEPS=4 SLOW_EVERY=2 SLOW_RUNS=2 bash bench/gpu_session.sh
# Settings: OUT, BUDGET (the workflow's, 540 s), SLOW_STEPS (200), SLOW_EVERY (25), SLOW_TIMEOUT (BUDGET),
# SLOW_RUNS (how many of RUNS below, from the first: 10, all; the dry run's 2 leave the 2 cores to the workflow), and
# gpu_workflow.sh's own (GPU_ID, TINY, ...), passed through.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export BUDGET=${BUDGET:-540}
SLOW_STEPS=${SLOW_STEPS:-200}
SLOW_EVERY=${SLOW_EVERY:-25}
SLOW_TIMEOUT=${SLOW_TIMEOUT:-$BUDGET}
SESSION=${SESSION:-/tmp/gpu_session}
rm -rf "$SESSION" && mkdir -p "$SESSION/workflow" "$SESSION/slow_start"
PY=${PYTHON:-python3}
if [ -z "${DATA:-}" ]; then
    if [ -f .gpusite/data/resume/train.char.bmes ]; then DATA=.gpusite/data/resume; else DATA=../shared/data/resume; fi
fi
export DATA

pack() {  # logs and result files only: no models, encoders or corpora
    (cd "$SESSION" && find workflow slow_start \( -name 'model-*' -o -name encoders -o -name corpus \) -prune -o \
        -type f \( -name '*.log' -o -name '*.json' -o -name '*.txt' \) -print | tar czf results.tar.gz.part -T -)
    mv -f "$SESSION/results.tar.gz.part" "$OUT/results.tar.gz"
}

# The workflow first (it unpacks .gpusite's site and installs this package, which the slow-start runs need).
OUT=$SESSION/workflow bash bench/gpu_workflow.sh > "$SESSION/workflow/stdout.log" 2>&1 &
workflow=$!
for _ in $(seq 60); do
    "$PY" -c "import spacy_transformers, spacy_cner" 2>/dev/null && break
    [ -d /tmp/site ] && PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} "$PY" -c "import spacy_transformers, spacy_cner" \
        2>/dev/null && { export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}; break; }
    sleep 2
done

# name | bench_slow_start.py arguments (a system, or the last system with --variant overrides)
RUNS=(
    "bert_crf|--systems bert_crf"
    "nezha_crf|--systems nezha_crf"
    "nezha_bilstm|--systems nezha_bilstm"
    "nezha_bilstm_df|--systems nezha_bilstm_df"
    "nezha_bilstm_df_at|--systems nezha_bilstm_df_at"
    "bert_bilstm|--systems bert_bilstm"
    "df_at_eps0.1|--systems nezha_bilstm_df_at --variant eps0.1:components.crf_ner.adversarial.epsilon=0.1"
    "df_at_scale1|--systems nezha_bilstm_df_at --variant scale1:components.crf_ner.tok2vec_learn_rate_scale=1.0"
    "df_at_lr2e-3|--systems nezha_bilstm_df_at --learn-rate 2e-3"
    "bilstm_lr2e-3|--systems nezha_bilstm --learn-rate 2e-3"
)
pids=()
for run in "${RUNS[@]:0:${SLOW_RUNS:-${#RUNS[@]}}}"; do
    name=${run%%|*}
    read -r -a args <<< "${run#*|}"
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout --kill-after=5 "$SLOW_TIMEOUT" "$PY" bench/bench_slow_start.py \
        --data "$DATA" --out "$SESSION/slow_start/$name" --steps "$SLOW_STEPS" --eval-every "$SLOW_EVERY" \
        "${args[@]}" --result - > "$SESSION/slow_start/$name.log" 2>&1 &
    pids+=($!)
done

while kill -0 "$workflow" 2>/dev/null; do
    pack
    sleep 20
done
for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do pack; sleep 10; done
done
# The workflow's result file alone too, so the headline is readable without unpacking.
cp "$SESSION/workflow/gpu_workflow.json" "$OUT/" 2>/dev/null
pack
echo "done: $OUT/results.tar.gz"
