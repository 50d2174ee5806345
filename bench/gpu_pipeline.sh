#!/usr/bin/env bash
# The whole pipeline on a GPU machine, by the product's own commands, on the real SmolLM2-135M-Instruct
# weights: install on top of the machine's CUDA torch, doctor, then `ferrylm data | train | export |
# eval` with the demo-gpu preset (bf16, compiled layers, 2 epochs; merged, ONNX and the Triton
# repository), evaluated in-process on the serving engine (eval.local=true), fine-tuned vs base with
# the paired tests ("Did the fine-tune help?"). Then the planner's held-out memory points on Qwen2.5-7B shapes.
#
#   bench/gpu_pipeline.sh [install|data|train|export|eval|planner|all] ...   (default: all)
#
# WHEELS=DIR: install from the wheels in DIR alone (no package index), where the machine has none.
# RESULTS=DIR: where the doctor output, the report and the planner's rows are copied (default bench/results/gpu).
# FERRYLM: the command (default .venv/bin/ferrylm; `python3 -m ferrylm` where the package is on PYTHONPATH).
# Everything else it needs (the tokenizer, the 7B-shaped model, the data) it makes itself.
set -euo pipefail
cd "$(dirname "$0")/.."
RESULTS=${RESULTS:-bench/results/gpu}
read -r -a FERRYLM <<< "${FERRYLM:-.venv/bin/ferrylm}"
CONFIG=(--config demo-gpu eval.local=true)
mkdir -p "$RESULTS"

install() {
  if [ -n "${WHEELS:-}" ]; then
    WHEELS=$(cd "$WHEELS" && pwd)
    export PIP_NO_INDEX=1 PIP_FIND_LINKS="$WHEELS"
    # bubblewrap from a Debian package in the same folder, unpacked beside the tree (not into /)
    if ! command -v bwrap >/dev/null && ls "$WHEELS"/bubblewrap_*.deb >/dev/null 2>&1; then
      dpkg -x "$WHEELS"/bubblewrap_*.deb .venv-bwrap
    fi
  fi
  make install DEVICE=system PYTHON="${PYTHON:-python3}"
  "${FERRYLM[@]}" doctor "${CONFIG[@]}" | tee "$RESULTS/doctor.txt" || true
}

stage() {
  local t0=$SECONDS
  "${FERRYLM[@]}" "$1" "${CONFIG[@]}" "${@:2}"
  echo "ferrylm $1: $((SECONDS - t0)) s" | tee -a "$RESULTS/stage_times.txt"
}

planner() {
  .venv/bin/python bench/train_zero.py --work /tmp/ft --out "$RESULTS/planner_heldout.json" \
    lora-1gpu-compile-layers-ckpt25 lora-1gpu-liger-ckpt50 lora-1gpu-compile-layers-liger-mb2 lora-1gpu-compile-layers-r64
}

[ -d .venv-bwrap/usr/bin ] && export PATH="$PWD/.venv-bwrap/usr/bin:$PATH"
for step in "${@:-all}"; do
  case "$step" in
    install) install ;;
    data|train|export) stage "$step" ;;
    eval) stage eval; cp runs/demo-gpu/eval/report.md runs/demo-gpu/eval/report.json "$RESULTS/" ;;
    doctor) "${FERRYLM[@]}" doctor "${CONFIG[@]}" | tee "$RESULTS/doctor.txt" || true ;;
    planner) planner ;;
    all) install; stage data; stage train; stage export; stage eval
         cp runs/demo-gpu/eval/report.md runs/demo-gpu/eval/report.json "$RESULTS/"; planner ;;
    *) echo "bench/gpu_pipeline.sh: unknown step '$step'" >&2; exit 2 ;;
  esac
done
