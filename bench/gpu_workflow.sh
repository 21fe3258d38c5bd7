#!/usr/bin/env bash
# The GPU issue's one device call: `pytest -m gpu`, then project.yml's `transformer` workflow (fetch-assets,
# convert, train-transformer, evaluate, package) with gpu_id 0 on a random bert-base-sized BERT (no hub),
# then the distillation route (issue 58: project.yml's `distill`, the transformer as teacher; skipped where
# `python -m spacy_cner distill` is missing).
# Every step is time-boxed (`timeout`, the whole under BUDGET seconds) and writes its result to $OUT as
# soon as it ends, so a call cut off at its limit still brings back what finished; a step that fails or
# runs out of time is recorded as such and the script goes on, and it always exits 0.
#
# On the device machine (`run` with carry [".gpusite"] from bench/gpu_carry.sh, timeout_s 600):
#   bash bench/gpu_workflow.sh
# The CPU dry run (tiny sizes, the same steps; with spaCy installed it needs no .gpusite):
#   OMP_NUM_THREADS=1 GPU_ID=-1 TINY=1 OUT=$(mktemp -d) bash bench/gpu_workflow.sh
#
# Settings, from the environment: OUT (default: a new temporary folder), WORK (scratch: /tmp/gpu_workflow,
# emptied first), GPU_ID (0; -1: the CPU), TINY (1: a 2-layer width-64 encoder, 6 steps), BUDGET (540 s),
# CONFIG (bert_crf), KIND (bert, or nezha for the nezha_* configs), LAYERS (12), WIDTH (768), STEPS (200),
# WARMUP (STEPS/20), EVAL_FREQUENCY (STEPS/2), MIXED (false), DISTILL_STEPS (600; TINY: 4), DATA (.gpusite/data/resume, else
# ../shared/data/resume), CODE_COMMIT (the commit, for the record: the device's copy has no .git), PYTHON.
# Files in $OUT (the device brings back 8 at most): gpu_workflow.json (bench/results' shape: the steps with
# status and seconds, test P/R/F1, chars/s, training time, machine, GPU), workflow.log (this script's
# progress and the short steps' output), pytest_gpu.log, train.log, metrics.json, package_listing.txt,
# distill.log, distill_metrics.json (the student's test scores).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
START=$(date +%s)
BUDGET=${BUDGET:-540}
DEADLINE=$((START + BUDGET))
PY=${PYTHON:-python3}
GPU_ID=${GPU_ID:-0}
TINY=${TINY:-0}
CONFIG=${CONFIG:-bert_crf}
KIND=${KIND:-bert}
MIXED=${MIXED:-false}
if [ "$TINY" = 1 ]; then
    LAYERS=${LAYERS:-2}; WIDTH=${WIDTH:-64}; STEPS=${STEPS:-6}; DISTILL_STEPS=${DISTILL_STEPS:-4}
else
    LAYERS=${LAYERS:-12}; WIDTH=${WIDTH:-768}; STEPS=${STEPS:-200}; DISTILL_STEPS=${DISTILL_STEPS:-600}
fi
WARMUP=${WARMUP:-$(( STEPS / 20 > 0 ? STEPS / 20 : 1 ))}
EVAL_FREQUENCY=${EVAL_FREQUENCY:-$(( STEPS / 2 > 0 ? STEPS / 2 : 1 ))}
if [ -z "${DATA:-}" ]; then
    if [ -f .gpusite/data/resume/train.char.bmes ]; then DATA=.gpusite/data/resume; else DATA=../shared/data/resume; fi
fi
OUT=${OUT:-$(mktemp -d)}
WORK=${WORK:-/tmp/gpu_workflow}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
LOG=$OUT/workflow.log
PROJECT=$WORK/project
export PYTHONUNBUFFERED=1 ANSI_COLORS_DISABLED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Nothing waits on a package index the device cannot reach: pip fails at once without one (the package
# step builds its sdist with --no-isolation, from the installed setuptools).
export PIP_NO_INDEX=1
: > "$LOG"
: > "$WORK/steps.tsv"

say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }

record() {  # the result file from the steps so far; never stops the script
    "$PY" bench/gpu_workflow.py record "$WORK" "$OUT/gpu_workflow.json" >> "$LOG" 2>&1 || say "record failed"
}

note_step() {  # note_step NAME STATUS RC SECONDS NOTE
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$WORK/steps.tsv"
    say "$1: $2 (rc $3, $4 s) $5"
    record
}

# step NAME CAP RESERVE LOGFILE COMMAND...: run COMMAND under `timeout`, for CAP seconds at most and
# never into the RESERVE seconds kept for the steps after it; its output appended to LOGFILE.
step() {
    local name=$1 cap=$2 reserve=$3 log=$4
    shift 4
    local left=$(( DEADLINE - $(date +%s) - reserve ))
    local limit=$(( cap < left ? cap : left ))
    if (( limit < 5 )); then
        note_step "$name" skipped 0 0 "no time left (budget ${BUDGET} s)"
        return 1
    fi
    say "== $name (at most ${limit} s): $*"
    echo "== $name: $*" >> "$log"
    local began=$(date +%s.%N)
    timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
    local rc=$?
    local seconds=$(awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    local status=ok note=""
    if (( rc == 124 || rc == 137 )); then
        status=timeout; note="stopped after ${limit} s"
    elif (( rc != 0 )); then
        status=failed; note="see $(basename "$log")"
    fi
    note_step "$name" "$status" "$rc" "$seconds" "$note"
    return "$rc"
}

skip() { note_step "$1" skipped 0 0 "$2"; }

COMMAND="GPU_ID=$GPU_ID TINY=$TINY CONFIG=$CONFIG KIND=$KIND LAYERS=$LAYERS WIDTH=$WIDTH STEPS=$STEPS MIXED=$MIXED DISTILL_STEPS=$DISTILL_STEPS bash bench/gpu_workflow.sh"
COMMIT=${CODE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
cat > "$WORK/settings.json" <<EOF
{"command": "$COMMAND", "gpu_id": $GPU_ID, "tiny": $TINY, "config": "$CONFIG", "kind": "$KIND",
 "layers": $LAYERS, "width": $WIDTH, "steps": $STEPS, "warmup": $WARMUP, "eval_frequency": $EVAL_FREQUENCY,
 "mixed_precision": $MIXED, "distill_steps": $DISTILL_STEPS, "budget": $BUDGET, "data": "$DATA",
 "code_version": {"commit": "$COMMIT", "dirty": null}}
EOF
say "out $OUT, work $WORK; $COMMAND"

# ---- (a) the packages: .gpusite's site (bench/gpu_carry.sh) where spaCy is missing, then this package ----
if ! "$PY" -c "import spacy, spacy_transformers" 2>/dev/null; then
    if [ -f .gpusite/site.tar.xz ]; then
        mkdir -p /tmp/site
        step unpack 60 400 "$LOG" tar xJf .gpusite/site.tar.xz -C /tmp/site
        export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    else
        skip unpack "spaCy is not installed and there is no .gpusite/site.tar.xz (bash bench/gpu_carry.sh)"
    fi
fi
if ! "$PY" -c "import importlib.metadata as m; m.version('spacy-cner')" 2>/dev/null; then
    step install 60 400 "$LOG" "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e .
fi
"$PY" -c "
import platform, torch, spacy, thinc, transformers
try:
    import cupy; c = cupy.__version__
except ImportError:
    c = 'none'
print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.cuda.is_available(),
      'cupy', c, 'spacy', spacy.__version__, 'thinc', thinc.__version__, 'transformers', transformers.__version__)
" >> "$LOG" 2>&1 || say "the packages do not import: see above"
if (( GPU_ID >= 0 )) && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1 \
        | awk -F', ' '{ printf "%s (%s, driver %s)\n", $1, $2, $3 }' > "$WORK/gpu.txt"
    nvidia-smi >> "$LOG" 2>&1
else
    echo "no GPU (gpu_id $GPU_ID)" > "$WORK/gpu.txt"
fi
record

# ---- (b) the GPU tests (on a machine without CUDA and CuPy each says why it skips) ----
# In the background, beside (c)'s first steps (CPU work: the encoder, the assets, the conversion): the two
# together took 87 + 90 s one after the other on an H200. (c)'s training waits for it.
step pytest-gpu 150 330 "$OUT/pytest_gpu.log" "$PY" -m pytest -m gpu tests/test_gpu.py -rs -p no:cacheprovider &
PYTEST_GPU=$!

# ---- (c) project.yml's transformer workflow, each command through `spacy project run`, on a copy ----
mkdir -p "$PROJECT"
cp project.yml "$PROJECT/"
cp -rL configs "$PROJECT/configs"
DATA=$(cd "$DATA" && pwd)
VARS=(--vars.config "$CONFIG" --vars.gpu_id "$GPU_ID" --vars.local_data "$(dirname "$DATA")"
      --vars.transformer "$WORK/encoder" --vars.transformer_max_steps "$STEPS"
      --vars.transformer_warmup_steps "$WARMUP" --vars.transformer_eval_frequency "$EVAL_FREQUENCY"
      --vars.mixed_precision "$MIXED")
SPACY_RUN=("$PY" -m spacy project run)
MODEL=$PROJECT/training/resume/$CONFIG/model-best

step encoder 60 300 "$LOG" "$PY" bench/gpu_workflow.py encoder --data "$DATA" --out "$WORK/encoder" \
    --kind "$KIND" --layers "$LAYERS" --width "$WIDTH"
step fetch-assets 30 290 "$LOG" "${SPACY_RUN[@]}" fetch-assets "$PROJECT" "${VARS[@]}"
step convert 60 280 "$LOG" "${SPACY_RUN[@]}" convert "$PROJECT" "${VARS[@]}"
wait "$PYTEST_GPU"
step train-transformer 330 110 "$OUT/train.log" "${SPACY_RUN[@]}" train-transformer "$PROJECT" "${VARS[@]}"
step evaluate 90 80 "$LOG" "${SPACY_RUN[@]}" evaluate "$PROJECT" "${VARS[@]}"
if [ -f "$PROJECT/metrics/resume_$CONFIG.json" ]; then
    cp "$PROJECT/metrics/resume_$CONFIG.json" "$WORK/metrics.json"
    cp "$PROJECT/metrics/resume_$CONFIG.json" "$OUT/metrics.json"
    record
fi
if [ -d "$MODEL" ]; then
    step speed 60 60 "$LOG" "$PY" bench/gpu_workflow.py speed "$MODEL" "$PROJECT/corpus/resume/test.spacy" \
        --gpu-id "$GPU_ID" --output "$WORK/speed.json"
else
    skip speed "no model-best (see train.log)"
fi
# The device reaches no package index: the sdist is built with the installed setuptools.
step package 150 60 "$LOG" "${SPACY_RUN[@]}" package "$PROJECT" "${VARS[@]}" --vars.package_build no-isolation
{
    echo "## packages/ ($PROJECT/packages)"
    (cd "$PROJECT" && find packages -maxdepth 3 | sort)
    for sdist in "$PROJECT"/packages/*/dist/*.tar.gz; do
        [ -f "$sdist" ] || continue
        echo; echo "## $(basename "$sdist"): $(du -h "$sdist" | cut -f1)"
        tar tzvf "$sdist"
    done
    for readme in "$PROJECT"/packages/*-model/README.md "$PROJECT"/packages/zh_*/README.md; do
        [ -f "$readme" ] || continue
        echo; echo "## $readme"; head -80 "$readme"
    done
} > "$OUT/package_listing.txt" 2>&1

# ---- (d) the distillation route (issue 58): the transformer trained above teaches the CPU student -------
# project.yml's `distill` (the teacher's soft targets on the train split through annotate's engine on this GPU,
# then configs/student_pretrain_free.cfg trained on them for DISTILL_STEPS: student.cfg fetches LAC's vectors
# through a package index the device cannot reach), the student evaluated on test. Skipped, saying so, where
# `python -m spacy_cner distill` does not exist.
if timeout 60 "$PY" -m spacy_cner distill --help > "$WORK/distill_help.txt" 2>&1; then
    if [ -d "$MODEL" ]; then
        step distill 150 20 "$OUT/distill.log" "${SPACY_RUN[@]}" distill "$PROJECT" "${VARS[@]}" \
            --vars.max_steps "$DISTILL_STEPS" --vars.distill_config student_pretrain_free
        STUDENT=$PROJECT/training/resume/student_pretrain_free/model-best
        if [ -d "$STUDENT" ]; then
            step distill-evaluate 60 0 "$OUT/distill.log" "$PY" -m spacy_cner evaluate "$STUDENT" \
                "$PROJECT/corpus/resume/test.spacy" --output "$WORK/student_metrics.json" \
                && cp "$WORK/student_metrics.json" "$OUT/distill_metrics.json" && record
        else
            skip distill-evaluate "no student model-best (see distill.log)"
        fi
    else
        skip distill "no teacher: train-transformer left no model-best"
    fi
else
    cat "$WORK/distill_help.txt" >> "$LOG"
    skip distill "'python -m spacy_cner distill --help' failed (issue 58's command missing?): $(sed 's/[│|]//g' "$WORK/distill_help.txt" | grep '[A-Za-z]' | tail -1 | sed 's/^ *//; s/ *$//' | cut -c1-160)"
fi

say "done in $(( $(date +%s) - START )) s; results in $OUT"
record
exit 0
