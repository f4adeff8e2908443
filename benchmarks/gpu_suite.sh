#!/usr/bin/env bash
# The GPU suite: every GPU measurement of the round in ONE call of the device tool (at most 8 minutes).
#
#   benchmarks/gpu_suite.sh OUT_DIR [--device cuda|cpu] [--tiny] [--only STEP[,STEP...]] [--bundle DIR]
#                                   [--budget-s S] [--dry-run] [--install | --no-install]
#   benchmarks/gpu_suite.sh --prepare-wheels        # here, once, with PyPI: fill .whl/ (see "Before" below)
#   benchmarks/gpu_suite.sh --list-steps
#
# Steps, in order (each logs to OUT_DIR/<step>.log, writes its figures to OUT_DIR/<step>.json and its exit code,
# seconds and command to OUT_DIR/status.tsv; a failing or timed-out step never stops the suite):
#   install            pip-install the carried wheels into /tmp/site (--no-deps; then PYTHONPATH=/tmp/site and
#                      PATH=/tmp/site/bin); this package from .whl/own, or built from the tree when the tree has changed
#                      since the wheel was built. Skipped with --device cpu (the packages are installed there).
#   (prepare)          in the background from here on: the videos and the random paper-geometry model folder of
#                      the predict step, the EGTEA-layout clips of the train step (CPU work, while the tests run)
#   preflight          versions, every import, installed versions against the wheels' requirements, a bf16 matmul
#                      and flash attention on the GPU
#   tests              pytest tests/gpu on the device (GAZEFLOW_TEST_DEVICE; in parallel with pytest-xdist where
#                      installed), junit XML in OUT_DIR/tests.xml
#   train              bench_train.py: the training step at the paper's geometry, train.py's compiled step (fed by the
#                      EGTEA data path with N workers beside its model-only figure; the loader alone; GPU-hours) and
#                      its candidates side by side, model only: the cuDNN and flash attention kernels, CUDA graphs,
#                      LoRA without dropout (the ones the time limit leaves out are named)
#   inference          bench_inference.py: ViT-L (24 layers), 64 frames of 256x256, random weights, bf16, fast vs
#                      reference path, K x S grid {30,50} x {5,50} (the paper's Table method_time rows)
#   pipeline           bench_pipeline.py --throughput: gazeflow predict --no-overlay's path on generated 30-second
#                      videos, the bundled model and the paper's geometry at 256x256 and 640x480, serial and
#                      overlapped side by side; frames per second and the stage times
#   streaming          bench_streaming.py: the causal streamer at K=30, S=5, bf16, the paper's geometry (ViT-L), its
#                      modes side by side (the previous streamer, the static step eager, captured as a CUDA graph):
#                      p50/p95/p99 per frame, aten ops and CUDA kernels per frame, peak memory
#   decode             (optional) bench_decode.py: decoding to RGB uint8 at 256x256, 640x480 and 1920x1080 on the
#                      machine's cores (PyAV's FFmpeg thread settings; torchcodec on the CPU and NVDEC where it is
#                      importable, else why not), and four videos decoded one, two and four at a time
#   inference-compile  (optional) bench_inference.py as above with --compile (torch.compile, CUDA graphs)
#   predict            (optional) the console command itself, `gazeflow predict --no-overlay`, on generated 30-second
#                      videos (process start and model load timed apart): the bundled model and the paper's geometry
#                      at 256x256, the paper's geometry at 640x480; then the bundled model on a folder of 8 copies of
#                      the 256x256 video in one process and shared among 4 (--num-processes 4); frames per second
#   streaming-bundled  (optional) the streamer's modes at the bundled model's size (causal)
#   streaming-compile  (optional) the streamer at the paper's geometry compiled with reduce-overhead, beside eager (its
#                      own step: compiling took 68 s on an H200 at 67653cb, more than the streaming step can hold)
#   profile            (optional) torch.profiler tables of the benchmarks above whose targets were missed
#   fulltests          (only with --only) the whole test suite with the GPU visible, OUT_DIR/fulltests.xml
# Time: every step runs under its own time limit (the plan printed first gives each step's estimate and limit), and
# no step runs past BUDGET + 60 s from the start; optional steps start only while less than BUDGET seconds
# (--budget-s, default 420 on a GPU) have passed. So the whole call ends within 8 minutes by default.
# Then OUT_DIR/summary.md: the device line, the commit, the plan against what ran, every figure against the targets
# and the paper. Every benchmark step also writes OUT_DIR/results/<benchmark>.<machine>.json: its figures with the
# commit, the machine and the fingerprints of the models it measured (benchmarks/results.py; the suite sets
# GAZEFLOW_BENCHMARK_RESULTS). --bundle DIR: also DIR/summary.md and DIR/gpu_suite.tar.gz (every log, figure and
# results file): 2 files for $OUT.
# --tiny: tiny models and sizes (a dry run; with --device cpu it is tests/test_gpu_suite.py's smoke test).
#
# ---------------------------------------------------------------------------------------------------------------
# Before (here, once; needs PyPI and a python3.12 for pysaliency's sdist):
#   benchmarks/gpu_suite.sh --prepare-wheels      # ~41 MiB in .whl/ (av alone 34 MiB), plus ~3 MiB of tree
# On the GPU machine, ONE `run` call of the device tool (carry [".whl"]; timeout_s 560; the machine is bare, so
# the suite installs first):
#   bash benchmarks/gpu_suite.sh /tmp/g --bundle "$OUT"
# Its two files come back under files_at: the tarball holds every log and JSON. Its results files go into
# docs/benchmark_results/ (each section replacing the one of its name) and the tables are rendered from them:
#   python benchmarks/results.py G/results/*.json && python benchmarks/render_tables.py
# Several calls' folders merge into one summary with: python benchmarks/gpu_suite_tools.py summary D1 D2 -o F
# ---------------------------------------------------------------------------------------------------------------
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
PYTHON="${PYTHON:-python3}"
SITE="${GAZEFLOW_SUITE_SITE:-/tmp/site}"
ALL_STEPS="install preflight tests train inference pipeline streaming decode inference-compile predict"
ALL_STEPS+=" streaming-bundled streaming-compile profile"
KNOWN_STEPS="$ALL_STEPS fulltests"
OPTIONAL_STEPS="decode inference-compile predict streaming-bundled streaming-compile profile fulltests"
# seconds: the estimate (what each step took in the one-call runs on an H200, the last at 67653cb: tests 99, train 124,
# inference 40, pipeline 69, decode 45, streaming's three modes 80, predict 64 before its batch runs (estimated at 40 s
# more); the others from earlier runs) and its own limit
declare -A ESTIMATE=([install]=10 [environment]=6 [preflight]=16 [tests]=95 [train]=120 [inference]=40 [pipeline]=70
                     [predict]=105 [decode]=45
                     [streaming]=80 [inference-compile]=62 [streaming-bundled]=60 [streaming-compile]=100 [profile]=45
                     [fulltests]=400)
declare -A LIMIT=([install]=120 [environment]=60 [preflight]=60 [tests]=130 [train]=160 [inference]=75 [pipeline]=110
                  [predict]=150 [decode]=60
                  [streaming]=120 [inference-compile]=90 [streaming-bundled]=90 [streaming-compile]=150 [profile]=70
                  [fulltests]=600)

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

case "${1:-}" in
  --prepare-wheels) cd "$REPO" && exec "$PYTHON" "$HERE/gpu_suite_tools.py" prepare-wheels ;;
  --list-steps) echo "$KNOWN_STEPS"; exit 0 ;;
  -h|--help|"") usage 0 ;;
esac

OUT_DIR="$1"; shift
DEVICE=cuda; TINY=0; ONLY=""; BUNDLE=""; DRY_RUN=0; INSTALL=auto; BUDGET=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE="${2:?--device needs cuda or cpu}"; shift 2 ;;
    --tiny) TINY=1; shift ;;
    --only) ONLY="${2:?--only needs a comma-separated list of steps}"; shift 2 ;;
    --bundle) BUNDLE="${2:?--bundle needs a folder}"; shift 2 ;;
    --budget-s) BUDGET="${2:?--budget-s needs a number of seconds}"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --install) INSTALL=yes; shift ;;
    --no-install) INSTALL=no; shift ;;
    *) echo "gpu_suite.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$DEVICE" in cuda|cuda:*|cpu) ;; *) echo "gpu_suite.sh: --device must be cuda or cpu, got '$DEVICE'" >&2; exit 2 ;; esac
[[ -z "$BUDGET" || "$BUDGET" =~ ^[0-9]+$ ]] || { echo "gpu_suite.sh: --budget-s must be a whole number of seconds, got '$BUDGET'" >&2; exit 2; }
[ "$INSTALL" = auto ] && { [ "$DEVICE" = cpu ] && INSTALL=no || INSTALL=yes; }
if [ "$DEVICE" = cpu ]; then  # a CPU dry run is slower than the GPU and only checks that every step runs
  BUDGET="${BUDGET:-3600}"; for step in "${!LIMIT[@]}"; do LIMIT[$step]=900; done
fi
BUDGET="${BUDGET:-420}"
for setting in ${GAZEFLOW_SUITE_LIMITS:+${GAZEFLOW_SUITE_LIMITS//,/ }}; do  # STEP=SECONDS,...: other limits (tests/test_gpu_suite.py)
  [[ "$setting" =~ ^[a-z-]+=[0-9]+$ ]] && [ -n "${LIMIT[${setting%%=*}]:-}" ] \
    || { echo "gpu_suite.sh: GAZEFLOW_SUITE_LIMITS must be STEP=SECONDS,..., got '$setting'" >&2; exit 2; }
  LIMIT[${setting%%=*}]=${setting#*=}
done
HARD_END=$((BUDGET + 60))  # no step runs past this many seconds from the start

STEPS="${ONLY//,/ }"
STEPS="${STEPS:-$ALL_STEPS}"
for step in $STEPS; do
  case " $KNOWN_STEPS " in *" $step "*) ;; *) echo "gpu_suite.sh: unknown step '$step' (steps: $KNOWN_STEPS)" >&2; exit 2 ;; esac
done

mkdir -p "$OUT_DIR" || exit 2
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
cd "$REPO" || exit 2
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export HF_DATASETS_CACHE="${HF_DATASETS_CACHE:-$(mktemp -d)}"
export GAZEFLOW_BENCHMARK_RESULTS="$OUT_DIR/results"  # every benchmark's figures with their provenance
WORK="${GAZEFLOW_SUITE_WORK:-$(mktemp -d -t gazeflow_suite_work.XXXXXX)}"  # videos and models: not in the bundle
TOOLS=("$PYTHON" "$HERE/gpu_suite_tools.py")
SUITE_START=$(date +%s)
: >"$OUT_DIR/status.tsv"
elapsed() { echo $(( $(date +%s) - SUITE_START )); }

# ------------------------------------------------------------------------------------------------ install
install_commands() {  # the pip commands of the install step, one per line (the dry run prints them)
  local stale=()
  if [ -f .whl/own/SOURCE.json ] && ! grep -q "\"$("${TOOLS[@]}" source-hash)\"" .whl/own/SOURCE.json; then
    stale=(--stale-own)
  elif ! ls .whl/own/transformers_gazeflow-*.whl >/dev/null 2>&1; then
    stale=(--stale-own)
  fi
  "${TOOLS[@]}" pip-commands ${stale[@]+"${stale[@]}"} | sed -n 's/^install: //p' | sed "s#--target /tmp/site#--target $SITE#"
}

do_install() {
  if [ "$INSTALL" = no ]; then
    echo "install skipped (--device cpu or --no-install): the packages are already importable here. On the GPU:"
    install_commands
    return 0
  fi
  ls .whl/*.whl >/dev/null 2>&1 || { echo "no wheels in .whl/: run benchmarks/gpu_suite.sh --prepare-wheels here and carry .whl"; return 1; }
  mkdir -p "$SITE"
  local command
  while IFS= read -r command; do
    echo "\$ $command"
    eval "$command" || return 1
  done < <(install_commands)
  "${TOOLS[@]}" source-hash >"$SITE/.gazeflow_suite_ready"  # what was installed: a later call reinstalls on a change
}

if [ "$INSTALL" = yes ]; then
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
fi

# ------------------------------------------------------------------------------------------------ the plan
is_optional() { [[ " $OPTIONAL_STEPS " == *" $1 "* ]]; }

plan_steps() {  # the steps in the order they run: install, environment, then the others
  local step
  [[ " $STEPS " == *" install "* ]] && echo install
  echo environment
  for step in $ALL_STEPS fulltests; do [[ " $STEPS " == *" $step "* ]] && [ "$step" != install ] && echo "$step"; done
}

print_plan() {  # the steps of this call with their estimates and limits, and the running total
  local total=0 step
  echo "plan: budget ${BUDGET} s (optional steps start only before it; every step ends by $HARD_END s)"
  printf '  %-18s %-9s %10s %8s %10s\n' step kind "estimate" limit "by then"
  : >"$OUT_DIR/plan.tsv"
  for step in $(plan_steps); do
    total=$((total + ESTIMATE[$step]))
    printf '  %-18s %-9s %9ss %7ss %9ss\n' "$step" "$(is_optional "$step" && echo optional || echo required)" \
      "${ESTIMATE[$step]}" "${LIMIT[$step]}" "$total"
    printf '%s\t%s\t%s\t%s\t%s\n' "$step" "$(is_optional "$step" && echo optional || echo required)" \
      "${ESTIMATE[$step]}" "${LIMIT[$step]}" "$BUDGET" >>"$OUT_DIR/plan.tsv"
  done
}

# ------------------------------------------------------------------------------------------------ steps
record() {  # record NAME CODE SECONDS COMMAND...
  local name="$1" code="$2" seconds="$3"; shift 3
  printf '%s\t%s\t%s\t%s\n' "$name" "$code" "$seconds" "$*" >>"$OUT_DIR/status.tsv"
}

step_limit() {  # the seconds step NAME may run now: its own limit, cut to what is left before HARD_END
  local left=$((HARD_END - $(elapsed)))
  echo $(( LIMIT[$1] < left ? LIMIT[$1] : left ))
}

run_step() {  # run_step NAME COMMAND...: log, time (under the step's limit) and record the exit code
  local name="$1"; shift
  local log="$OUT_DIR/$name.log" started rc limit
  echo "== $name ($(elapsed) s in): $*"
  if [ "$DRY_RUN" = 1 ]; then
    if [ "$name" = install ]; then
      echo "   here, once (--prepare-wheels):"
      "${TOOLS[@]}" pip-commands | sed -n 's/^download: /     /p'
      echo "   on the GPU machine:"
      install_commands | sed 's/^/     /'
    fi
    record "$name" dry-run 0 "$@"
    return 0
  fi
  limit=$(step_limit "$name")
  if is_optional "$name" && [ "$(elapsed)" -ge "$BUDGET" ]; then
    echo "   skipped: $(elapsed) s have passed, the budget is $BUDGET s"; record "$name" "skipped (budget)" 0 "$@"; return 0
  fi
  if [ $((HARD_END - $(elapsed))) -lt 5 ]; then
    echo "   skipped: no time left before $HARD_END s"; record "$name" "skipped (no time)" 0 "$@"; return 0
  fi
  started=$(date +%s%N)
  if [ "$(type -t "$1")" = function ]; then
    STEP_LIMIT=$limit "$@" >"$log" 2>&1
  else
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  fi
  rc=$?
  local milliseconds=$(( ($(date +%s%N) - started) / 1000000 ))
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && rc="timeout ${limit} s"
  record "$name" "$rc" "$((milliseconds / 1000)).$((milliseconds % 1000 / 100))" "$@"
  echo "   exit $rc, $(tail -c 300 "$log" | tail -n 1)"
}

bench_args() {  # bench_args inference|streaming|streaming-bundled|streaming-compile|train|pipeline|decode:
                #   a benchmark's arguments
  if [ "$TINY" = 1 ]; then
    case "$1" in
      inference) echo "--preset tiny --grid-k 2 --grid-s 1 2 --reference-k 2 --reference-s 2 --repeats 1" ;;
      streaming) echo "--preset tiny --frames 12 --warmup 2 --reference-frames 6 --baseline-frames 1 --num-samples 30
                       --num-steps 5" ;;
      streaming-bundled) echo "--preset bundled --frames 8 --warmup 2 --reference-frames 4 --baseline-frames 1
                               --num-samples 30 --num-steps 5" ;;
      streaming-compile) echo "--preset tiny --frames 6 --warmup 2 --baseline-frames 1 --num-samples 30 --num-steps 5
                               --modes eager --results-section tiny-compiled" ;;
      train) echo "--preset tiny --variants B2+probe B2+fast+ckpt --data-steps 2 --workers 0 2 --steps 1" ;;
      pipeline) echo "--throughput --throughput-models tiny --throughput-sizes 64x64 160x120 --seconds 2" ;;
      decode) echo "--sizes 64x64 160x120 --frames 12 --repeats 1 --batch --videos 2" ;;
    esac
  else
    case "$1" in
      inference) echo "--frames 64 --encoder-layers 24 --grid-k 30 50 --grid-s 5 50 --reference-k 30 --reference-s 5" ;;
      streaming) echo "--encoder-layers 24 --frames 150 --warmup 20 --reference-frames 40 --baseline-frames 2
                       --num-samples 30 --num-steps 5 --modes reference,eager,cuda-graph" ;;
      streaming-bundled) echo "--preset bundled --frames 150 --warmup 20 --reference-frames 40 --baseline-frames 2
                               --num-samples 30 --num-steps 5" ;;
      streaming-compile) echo "--encoder-layers 24 --frames 150 --warmup 20 --baseline-frames 1 --num-samples 30
                               --num-steps 5 --modes eager,reduce-overhead --results-section paper-compiled" ;;
      train) echo "--variants B8+fast+compile B8+fast+compile+sdpa=cudnn B8+fast+compile+sdpa=flash
                   B8+fast+compile+graphs B8+fast+compile+nodrop --data-variants B8+fast+compile --workers 12
                   --data-steps 8" ;;
      pipeline) echo "--throughput --seconds 30" ;;
      decode) echo "--frames 96 --repeats 3 --batch --videos 4" ;;
    esac
  fi
}

profile_step() {  # the profiler tables of the benchmarks whose targets were missed in this OUT_DIR (--tiny: all)
  local missed status=0
  missed="$("${TOOLS[@]}" missed-targets "$OUT_DIR")"
  [ "$TINY" = 1 ] && missed="inference streaming"
  echo "targets missed in: ${missed:-nothing here (no benchmark output in $OUT_DIR, or every target met)}"
  if [[ " $missed " == *" inference "* ]]; then
    # shellcheck disable=SC2046
    timeout --kill-after=10 "$(step_limit profile)" "$PYTHON" benchmarks/bench_inference.py --device "$DEVICE" \
      $(bench_args inference) --reference-k 30 --reference-s 5 --profile-only \
      --json "$OUT_DIR/profile-inference.json" || status=$?
  fi
  if [[ " $missed " == *" streaming "* ]]; then
    # shellcheck disable=SC2046
    timeout --kill-after=10 "$(step_limit profile)" "$PYTHON" benchmarks/bench_streaming.py --device "$DEVICE" \
      $(bench_args streaming) --profile-only --json "$OUT_DIR/profile-streaming.json" || status=$?
  fi
  return $status
}

tests_step() {  # tests/gpu, in 4 processes of 4 CPU threads each where pytest-xdist is installed (the GPU image)
  local parallel=() threads="${OMP_NUM_THREADS:-}"
  if "$PYTHON" -c "import xdist" 2>/dev/null; then parallel=(-n 4 --dist load -p no:benchmark); threads=4; fi
  GAZEFLOW_TEST_DEVICE="$DEVICE" OMP_NUM_THREADS="${threads:-$(nproc)}" timeout --kill-after=10 "$STEP_LIMIT" \
    "$PYTHON" -m pytest -q tests/gpu -p no:cacheprovider -rs ${parallel[@]+"${parallel[@]}"} \
    --junitxml="$OUT_DIR/tests.xml"
}

PREPARE_PID=""
start_prepare() {  # the predict and train steps' inputs, made in the background while other steps run
  [ "$DRY_RUN" = 1 ] && return 0
  [[ " $STEPS " == *" train "* || " $STEPS " == *" predict "* ]] || return 0
  echo "== prepare ($(elapsed) s in): in the background, into $WORK (log: $OUT_DIR/prepare.log)"
  PREPARE_STARTED=$(date +%s)
  timeout --kill-after=10 300 "${TOOLS[@]}" prepare "$WORK" --device "$DEVICE" $([ "$TINY" = 1 ] && echo --tiny) \
    >"$OUT_DIR/prepare.log" 2>&1 &
  PREPARE_PID=$!
}

wait_prepare() {  # once: wait for the background inputs and record how long they took
  [ -n "$PREPARE_PID" ] || return 0
  local rc=0
  wait "$PREPARE_PID" || rc=$?
  local took
  took=$("$PYTHON" -c "import json, sys; print(json.load(open(sys.argv[1])).get('seconds', '?'))" \
    "$WORK/prepared.json" 2>/dev/null || echo "?")
  record prepare "$rc" "$took" "${TOOLS[*]} prepare $WORK (in the background, from $((PREPARE_STARTED - SUITE_START)) s)"
  echo "   prepare: exit $rc, took $took s (waited for until $(elapsed) s)"
  PREPARE_PID=""
}

ensure_installed() {  # a fresh machine is bare; a warm one keeps /tmp/site, reinstalled when the sources changed
  [ "$INSTALL" = yes ] || return 0
  [[ " $STEPS " == *" install "* ]] && return 0
  [ "$(cat "$SITE/.gazeflow_suite_ready" 2>/dev/null)" = "$("${TOOLS[@]}" source-hash)" ] || STEPS="install $STEPS"
}
ensure_installed
print_plan

if [[ " $STEPS " == *" install "* ]]; then run_step install do_install; fi
run_step environment "${TOOLS[@]}" environment "$OUT_DIR" --device "$DEVICE"  # the versions as installed
start_prepare
for step in $ALL_STEPS fulltests; do
  [[ " $STEPS " == *" $step "* ]] && [ "$step" != install ] || continue
  if [ "$step" = train ] || [ "$step" = predict ]; then wait_prepare; fi
  # shellcheck disable=SC2046
  case "$step" in
    preflight) run_step preflight "${TOOLS[@]}" preflight "$OUT_DIR" --device "$DEVICE" ;;
    tests) run_step tests tests_step ;;
    fulltests) run_step fulltests "$PYTHON" -m pytest -q tests -p no:cacheprovider -rs --junitxml="$OUT_DIR/fulltests.xml" ;;
    train) run_step train "$PYTHON" benchmarks/bench_train.py --device "$DEVICE" $(bench_args train) \
             --data-dir "$WORK/egtea" --time-limit $(( $(step_limit train) * 2 / 3 )) --json "$OUT_DIR/train.json" ;;
    inference) run_step inference "$PYTHON" benchmarks/bench_inference.py --device "$DEVICE" $(bench_args inference) \
                 --json "$OUT_DIR/inference.json" ;;
    inference-compile) run_step inference-compile "$PYTHON" benchmarks/bench_inference.py --device "$DEVICE" \
                         $(bench_args inference) --compile --json "$OUT_DIR/inference-compile.json" ;;
    streaming) run_step streaming "$PYTHON" benchmarks/bench_streaming.py --device "$DEVICE" $(bench_args streaming) \
                 --json "$OUT_DIR/streaming.json" ;;
    streaming-bundled) run_step streaming-bundled "$PYTHON" benchmarks/bench_streaming.py --device "$DEVICE" \
                         $(bench_args streaming-bundled) --json "$OUT_DIR/streaming-bundled.json" ;;
    streaming-compile) run_step streaming-compile "$PYTHON" benchmarks/bench_streaming.py --device "$DEVICE" \
                         $(bench_args streaming-compile) --json "$OUT_DIR/streaming-compile.json" ;;
    profile) run_step profile profile_step ;;
    pipeline) run_step pipeline "$PYTHON" benchmarks/bench_pipeline.py --device "$DEVICE" $(bench_args pipeline) \
                --json "$OUT_DIR/pipeline.json" ;;
    decode) run_step decode "$PYTHON" benchmarks/bench_decode.py --device "$DEVICE" $(bench_args decode) \
              --json "$OUT_DIR/decode.json" ;;
    predict) run_step predict "${TOOLS[@]}" predict "$OUT_DIR" --device "$DEVICE" --work "$WORK" \
               $([ "$TINY" = 1 ] && echo --tiny) ;;
  esac
done
wait_prepare

"${TOOLS[@]}" summary "$OUT_DIR" -o "$OUT_DIR/summary.md" >/dev/null 2>"$OUT_DIR/summary.log" \
  || echo "summary failed: see $OUT_DIR/summary.log"
echo "summary: $OUT_DIR/summary.md ($(elapsed) s in all)"
if [ -n "$BUNDLE" ]; then
  mkdir -p "$BUNDLE" && cp "$OUT_DIR/summary.md" "$BUNDLE/summary.md" 2>/dev/null
  tar -czf "$BUNDLE/gpu_suite.tar.gz" -C "$OUT_DIR" . && echo "bundle: $BUNDLE/gpu_suite.tar.gz"
fi
[ -n "${GAZEFLOW_SUITE_WORK:-}" ] || rm -rf "$WORK"
failed=$(awk -F'\t' '$2 != "0" && $2 != "dry-run" && $2 !~ /^skipped/' "$OUT_DIR/status.tsv" | cut -f1 | tr '\n' ' ')
[ -z "$failed" ] || { echo "steps that failed or timed out: $failed"; exit 1; }
exit 0
