#!/usr/bin/env bash
# The GPU suite: everything that has never run on a GPU, run and measured in one command.
#
#   benchmarks/gpu_suite.sh OUT_DIR [--device cuda|cpu] [--tiny] [--only STEP[,STEP...]] [--bundle DIR]
#                                   [--dry-run] [--install | --no-install]
#   benchmarks/gpu_suite.sh --prepare-wheels        # here, once, with PyPI: fill .whl/ (see "Before" below)
#   benchmarks/gpu_suite.sh --list-steps
#
# Steps, in order (each logs to OUT_DIR/<step>.log, writes its figures to OUT_DIR/<step>.json and its exit code to
# OUT_DIR/status.tsv; a failing step never stops the suite):
#   install            pip-install the carried wheels into /tmp/site (--no-deps; then PYTHONPATH=/tmp/site and
#                      PATH=/tmp/site/bin); this package from .whl/own, or built from the tree when the tree has changed
#                      since the wheel was built. Skipped with --device cpu (the packages are installed there): the
#                      pip commands are printed instead. Runs before any other step when /tmp/site is not ready.
#   preflight          versions, every import, installed versions against the wheels' requirements, a bf16 matmul
#                      and flash attention on the GPU
#   tests              pytest tests/gpu on the device (GAZEFLOW_TEST_DEVICE), junit XML in OUT_DIR/tests.xml
#   fulltests          (only with --only) the whole test suite with the GPU visible, OUT_DIR/fulltests.xml
#   inference          bench_inference.py: ViT-L (24 layers), 64 frames of 256x256, random weights, bf16, fast vs
#                      reference path, K x S grid {1,10,30,50} x {1,2,5,10,50}, side by side with the paper
#   inference-compile  the same with --compile (torch.compile, CUDA graphs)
#   streaming          bench_streaming.py: the causal streamer at K=30, S=5, ViT-L, bf16: the previous streamer, the static
#                      step eager, captured as a CUDA graph and compiled (reduce-overhead); p50/p95/p99 per frame,
#                      aten ops and CUDA kernels per frame, peak memory
#   profile            torch.profiler tables of the benchmarks above whose targets were missed (in this OUT_DIR)
#   predict            gazeflow predict --no-overlay on a generated 10-minute 256x256 video: frames per second
# Then OUT_DIR/summary.md: the device line, the commit, every command, every figure against the targets.
# --tiny: tiny models and sizes (a dry run; with --device cpu it is tests/test_gpu_suite.py's smoke test).
# --bundle DIR: also write DIR/summary.md and DIR/gpu_suite.tar.gz (every log and figure): 2 files for $OUT.
#
# ---------------------------------------------------------------------------------------------------------------
# Before (here, once; needs PyPI and a python3.12 for pysaliency's sdist):
#   benchmarks/gpu_suite.sh --prepare-wheels      # ~41 MiB in .whl/ (av alone 34 MiB), plus ~3 MiB of tree
# On the GPU machine, the device tool's `run` calls (each < 10 minutes; the machine is bare at every fresh start,
# so every call installs first, ~30 s; carry [".whl"]; name the kind "nvidia-h100-x1" for the H100 figures):
#   1. bash benchmarks/gpu_suite.sh /tmp/g --only preflight,tests --bundle "$OUT"          (~4 min)
#   2. bash benchmarks/gpu_suite.sh /tmp/g --only inference,profile --bundle "$OUT"        (~4 min)
#   3. bash benchmarks/gpu_suite.sh /tmp/g --only inference-compile,streaming,profile --bundle "$OUT"  (~6 min)
#   4. bash benchmarks/gpu_suite.sh /tmp/g --only predict --bundle "$OUT"                  (~5 min)
#   (optional, if minutes are left: --only fulltests)
# The pre-flight alone, first, if in doubt about the image (~1 min):
#   bash benchmarks/gpu_suite.sh /tmp/g --only preflight --bundle "$OUT"
# Each call's files come back under files_at: unpack the tarballs side by side, then here
#   python benchmarks/gpu_suite_tools.py summary DIR1 DIR2 DIR3 DIR4 -o summary.md
# merges the calls into one summary.md for docs/benchmarks.md ("H100").
# ---------------------------------------------------------------------------------------------------------------
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
PYTHON="${PYTHON:-python3}"
SITE="${GAZEFLOW_SUITE_SITE:-/tmp/site}"
ALL_STEPS="install preflight tests inference inference-compile streaming profile predict"
KNOWN_STEPS="$ALL_STEPS fulltests"

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

case "${1:-}" in
  --prepare-wheels) cd "$REPO" && exec "$PYTHON" "$HERE/gpu_suite_tools.py" prepare-wheels ;;
  --list-steps) echo "$KNOWN_STEPS"; exit 0 ;;
  -h|--help|"") usage 0 ;;
esac

OUT_DIR="$1"; shift
DEVICE=cuda; TINY=0; ONLY=""; BUNDLE=""; DRY_RUN=0; INSTALL=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE="${2:?--device needs cuda or cpu}"; shift 2 ;;
    --tiny) TINY=1; shift ;;
    --only) ONLY="${2:?--only needs a comma-separated list of steps}"; shift 2 ;;
    --bundle) BUNDLE="${2:?--bundle needs a folder}"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --install) INSTALL=yes; shift ;;
    --no-install) INSTALL=no; shift ;;
    *) echo "gpu_suite.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$DEVICE" in cuda|cuda:*|cpu) ;; *) echo "gpu_suite.sh: --device must be cuda or cpu, got '$DEVICE'" >&2; exit 2 ;; esac
[ "$INSTALL" = auto ] && { [ "$DEVICE" = cpu ] && INSTALL=no || INSTALL=yes; }

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
TOOLS=("$PYTHON" "$HERE/gpu_suite_tools.py")
: >"$OUT_DIR/status.tsv"

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

# ------------------------------------------------------------------------------------------------ steps
run_step() {  # run_step NAME COMMAND...: log, time and record the exit code; never stop the suite
  local name="$1"; shift
  local log="$OUT_DIR/$name.log" started rc
  echo "== $name: $*"
  if [ "$DRY_RUN" = 1 ]; then
    if [ "$name" = install ]; then
      echo "   here, once (--prepare-wheels):"
      "${TOOLS[@]}" pip-commands | sed -n 's/^download: /     /p'
      echo "   on the GPU machine:"
      install_commands | sed 's/^/     /'
    fi
    printf '%s\t%s\t%s\t%s\n' "$name" "dry-run" "0" "$*" >>"$OUT_DIR/status.tsv"
    return 0
  fi
  started=$(date +%s%N)
  "$@" >"$log" 2>&1
  rc=$?
  local milliseconds=$(( ($(date +%s%N) - started) / 1000000 ))
  printf '%s\t%s\t%d.%d\t%s\n' "$name" "$rc" $((milliseconds / 1000)) $((milliseconds % 1000 / 100)) "$*" \
    >>"$OUT_DIR/status.tsv"
  echo "   exit $rc, $(tail -c 300 "$log" | tail -n 1)"
}

bench_args() {  # bench_args inference|streaming: the benchmark's arguments for the device and --tiny
  if [ "$TINY" = 1 ]; then
    case "$1" in
      inference) echo "--preset tiny --grid-k 2 --grid-s 1 2 --reference-k 2 --reference-s 2 --repeats 1" ;;
      streaming) echo "--preset tiny --frames 12 --warmup 2 --baseline-frames 1 --num-samples 30 --num-steps 5" ;;
    esac
  else
    case "$1" in
      inference) echo "--frames 64 --encoder-layers 24 --grid-k 1 10 30 50 --grid-s 1 2 5 10 50 --reference-k 30 --reference-s 5" ;;
      streaming) echo "--encoder-layers 24 --frames 200 --warmup 20 --reference-frames 60 --baseline-frames 3 --num-samples 30 --num-steps 5" ;;
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
    "$PYTHON" benchmarks/bench_inference.py --device "$DEVICE" $(bench_args inference) --reference-k 30 \
      --reference-s 5 --profile-only --json "$OUT_DIR/profile-inference.json" || status=$?
  fi
  if [[ " $missed " == *" streaming "* ]]; then
    # shellcheck disable=SC2046
    "$PYTHON" benchmarks/bench_streaming.py --device "$DEVICE" $(bench_args streaming) --profile-only \
      --json "$OUT_DIR/profile-streaming.json" || status=$?
  fi
  return $status
}

ensure_installed() {  # a fresh machine is bare; a warm one keeps /tmp/site, reinstalled when the sources changed
  [ "$INSTALL" = yes ] || return 0
  [[ " $STEPS " == *" install "* ]] && return 0
  [ "$(cat "$SITE/.gazeflow_suite_ready" 2>/dev/null)" = "$("${TOOLS[@]}" source-hash)" ] || STEPS="install $STEPS"
}
ensure_installed

run_step environment "${TOOLS[@]}" environment "$OUT_DIR" --device "$DEVICE"
for step in $ALL_STEPS fulltests; do
  [[ " $STEPS " == *" $step "* ]] || continue
  # shellcheck disable=SC2046
  case "$step" in
    install) run_step install do_install ;;
    preflight) run_step preflight "${TOOLS[@]}" preflight "$OUT_DIR" --device "$DEVICE" ;;
    tests) run_step tests env GAZEFLOW_TEST_DEVICE="$DEVICE" "$PYTHON" -m pytest -q tests/gpu -p no:cacheprovider -rs \
             --junitxml="$OUT_DIR/tests.xml" ;;
    fulltests) run_step fulltests "$PYTHON" -m pytest -q tests -p no:cacheprovider -rs --junitxml="$OUT_DIR/fulltests.xml" ;;
    inference) run_step inference "$PYTHON" benchmarks/bench_inference.py --device "$DEVICE" $(bench_args inference) \
                 --json "$OUT_DIR/inference.json" ;;
    inference-compile) run_step inference-compile "$PYTHON" benchmarks/bench_inference.py --device "$DEVICE" \
                         $(bench_args inference) --compile --json "$OUT_DIR/inference-compile.json" ;;
    streaming) run_step streaming "$PYTHON" benchmarks/bench_streaming.py --device "$DEVICE" $(bench_args streaming) \
                 --json "$OUT_DIR/streaming.json" ;;
    profile) run_step profile profile_step ;;
    predict) run_step predict "${TOOLS[@]}" predict "$OUT_DIR" --device "$DEVICE" $([ "$TINY" = 1 ] && echo --tiny) ;;
  esac
done

"${TOOLS[@]}" summary "$OUT_DIR" -o "$OUT_DIR/summary.md" >/dev/null 2>"$OUT_DIR/summary.log" \
  || echo "summary failed: see $OUT_DIR/summary.log"
echo "summary: $OUT_DIR/summary.md"
if [ -n "$BUNDLE" ]; then
  mkdir -p "$BUNDLE" && cp "$OUT_DIR/summary.md" "$BUNDLE/summary.md" 2>/dev/null
  tar -czf "$BUNDLE/gpu_suite.tar.gz" -C "$OUT_DIR" . && echo "bundle: $BUNDLE/gpu_suite.tar.gz"
fi
failed=$(awk -F'\t' '$2 != "0" && $2 != "dry-run"' "$OUT_DIR/status.tsv" | cut -f1 | tr '\n' ' ')
[ -z "$failed" ] || { echo "steps that failed: $failed"; exit 1; }
exit 0
