#!/usr/bin/env bash
# The whole pipeline on a GPU machine, by the product's own commands, on the real SmolLM2-135M-Instruct
# weights: install on top of the machine's CUDA torch, doctor, then `ferrylm data | train | export |
# eval` with the demo-gpu preset (bf16, compiled layers, 2 epochs; merged, ONNX and the Triton
# repository), evaluated in-process on the serving engine (eval.local=true), fine-tuned vs base with
# the paired tests ("Did the fine-tune help?"). Then the planner's held-out memory points on Qwen2.5-7B shapes.
#
#   studies/gpu_pipeline/gpu_pipeline.sh [install|data|train|export|quant|serve|serve-vllm|triton-7b|qlora|eval|eval-triton|eval-vllm|planner|all] ...
#   (default: all)
#
# quant: the export with W4A16 calibrated (GPTQ), then again with round-to-nearest, both manifests kept.
# serve: `ferrylm serve serve.backend=triton` on the GPU — `ferrylm complete --triton` streams, a bad
#        request, 512 tokens through the endpoint, SIGTERM with a stream in flight — then 512 tokens
#        through Triton beside the same engines in-process (benchmarks/serve_triton.py). serve-vllm: the same
#        checks through vLLM's CUDA build for the merged model, W4A16, serve.lora=true and a 7B-shaped
#        bf16 model (Q7=DIR, made if missing; Q7=none skips it) and its W4A16 artifact (Q7W4=DIR, group 128,
#        made if missing); SERVERS="merged w4a16 lora 7b 7b-w4a16" picks some. triton-7b: the 7B shape in bf16
#        and W4A16 on the engine in-process and through Triton. eval-vllm: the evaluation through
#        `ferrylm serve` on vLLM (eval.local=false). qlora: a short QLoRA run, its peak beside the plan.
#
# WHEELS=DIR: install from the wheels in DIR alone (no package index), where the machine has none.
# RESULTS=DIR: where the doctor output, the report and the planner's rows are copied (default studies/gpu_pipeline/results/gpu).
# FERRYLM: the command (default .venv/bin/ferrylm; `python3 -m ferrylm` where the package is on PYTHONPATH).
# ARGS: dotted overrides for every stage, e.g. ARGS="train.max_steps=330".
# Everything else it needs (the tokenizer, the 7B-shaped model, the data) it makes itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
RESULTS=${RESULTS:-studies/gpu_pipeline/results/gpu}
read -r -a FERRYLM <<< "${FERRYLM:-.venv/bin/ferrylm}"
read -r -a EXTRA <<< "${ARGS:-}"
CONFIG=(--config demo-gpu eval.local=true "${EXTRA[@]}")
PY=${PYTHON:-python3}
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

# Its exit status is the command's (an `if` or `||` around it turns off set -e inside, so it says so itself).
stage() {
  local t0=$SECONDS rc=0
  "${FERRYLM[@]}" "$1" "${CONFIG[@]}" "${@:2}" || rc=$?
  echo "ferrylm $1: $((SECONDS - t0)) s, exit $rc" | tee -a "$RESULTS/stage_times.txt"
  return $rc
}

quant() {
  local e=runs/demo-gpu/export
  # Round-to-nearest first: its gate may refuse it (exit 2, the export's record withdrawn); the log keeps
  # the line. Then GPTQ, whose export (and record) is the one the later steps serve.
  rm -rf "$e/vllm-w4a16"
  if stage export export.onnx=false "export.vllm_quantize=[w4a16]" export.w4a16_method=rtn 2>&1 \
       | tee "$RESULTS/export_rtn.log"; then
    cp "$e/vllm-w4a16/manifest.json" "$RESULTS/w4a16_rtn_manifest.json"
  fi
  stage export export.onnx=false "export.vllm_quantize=[w4a16]" 2>&1 | tee "$RESULTS/export_gptq.log"
  cp "$e/vllm-w4a16/manifest.json" "$RESULTS/w4a16_gptq_manifest.json"
}

# One server through `ferrylm serve`: ready, a streamed completion, a bad request, 512 tokens timed
# through the endpoint, then SIGTERM with a stream in flight (also after a failed check: the server never
# outlives the step). $1: a name for the files; the rest: overrides (serve.backend=triton,
# serve.artifact=w4a16, serve.lora=true, ...).
serve_one() {
  local name=$1 port=8311 url=http://127.0.0.1:8311 pid ready=/health bad=/v1/chat/completions flags=()
  shift
  if [[ " $* " == *" serve.backend=triton "* ]]; then
    ready=/v2/models/ferrylm/ready bad=/v2/models/ferrylm/generate_stream flags=(--triton)
  fi
  local out="$RESULTS/serve_$name.txt" failed=0
  "${FERRYLM[@]}" serve "${CONFIG[@]}" serve.port=$port "$@" > "$RESULTS/serve_$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 900); do
    curl -sf "$url$ready" >/dev/null && break
    kill -0 $pid 2>/dev/null || { tail -40 "$RESULTS/serve_$name.log"; return 1; }
    sleep 1
  done
  "${FERRYLM[@]}" complete "${flags[@]}" --url $url --max-tokens 64 "def fibonacci(n):" | tee "$out" || failed=1
  echo "bad request (no prompt, no messages):" >> "$out"
  curl -s -w " -> HTTP %{http_code}\n" -X POST "$url$bad" -H 'Content-Type: application/json' -d '{"max_tokens": 8}' >> "$out"
  "$PY" benchmarks/endpoint_latency.py --url $url "${flags[@]}" --runs 3 --out "$RESULTS/latency_$name.json" | tee -a "$out" \
    || failed=1
  "${FERRYLM[@]}" complete "${flags[@]}" --url $url --max-tokens 200 "def quicksort(xs):" > /tmp/inflight.txt &
  local client=$!
  for _ in $(seq 300); do [ -s /tmp/inflight.txt ] && break; sleep 0.1; done   # its first words arrived
  kill -TERM $pid; local t0=$SECONDS
  local rc=0; wait $client || rc=$?
  echo "stream in flight at SIGTERM: client exit $rc, $(wc -c < /tmp/inflight.txt) characters" >> "$out"
  rc=0; wait $pid || rc=$?
  echo "ferrylm serve exit $rc, $((SECONDS - t0)) s after SIGTERM" >> "$out"
  cat "$out"
  return $failed
}

serve() {
  serve_one triton serve.backend=triton
  "$PY" benchmarks/serve_triton.py --merged runs/demo-gpu/export/merged --work /tmp/st --runs 3 --in-process \
    --engines "${TRITON_ENGINES:-ferrylm-fused,ferrylm-w4a16}" --w4a16 runs/demo-gpu/export/vllm-w4a16 \
    --out "$RESULTS/serve_triton_gpu.json"
}

# vLLM's CUDA build behind `ferrylm serve`: the merged model, its W4A16 artifact (Marlin kernels) and the
# base with the run's adapter (serve.lora=true); then a Qwen2.5-7B-shaped model in bf16 (random weights).
serve_vllm() {
  local q7=${Q7:-/tmp/q7} q7w4=${Q7W4:-/tmp/q7w4} failed=0 servers=" ${SERVERS:-merged w4a16 lora 7b 7b-w4a16} "
  [[ $servers == *" merged "* ]] && { serve_one vllm_merged serve.backend=vllm || failed=1; }
  [[ $servers == *" w4a16 "* ]] && { serve_one vllm_w4a16 serve.backend=vllm serve.artifact=w4a16 || failed=1; }
  [[ $servers == *" lora "* ]] && { serve_one vllm_lora serve.backend=vllm serve.lora=true || failed=1; }
  if [ "$q7" != none ] && [[ $servers == *" 7b "* ]]; then
    [ -f "$q7/config.json" ] || "$PY" benchmarks/make_qwen7b_shape.py "$q7" runs/demo-gpu/export/merged
    serve_one vllm_7b serve.backend=vllm "serve.model=$q7" serve.gpu_memory_utilization=0.9 || failed=1
  fi
  if [[ $servers == *" 7b-w4a16 "* ]]; then
    [ -f "$q7w4/config.json" ] || "$PY" benchmarks/make_qwen7b_shape.py "$q7w4" runs/demo-gpu/export/merged 128
    serve_one vllm_7b_w4a16 serve.backend=vllm "serve.model=$q7w4" serve.gpu_memory_utilization=0.9 || failed=1
  fi
  return $failed
}

# The 7B shape (bf16 and W4A16, as serve-vllm makes them) on the engine in-process and through Triton.
triton_7b() {
  local q7=${Q7:-/tmp/q7} q7w4=${Q7W4:-/tmp/q7w4}
  [ -f "$q7/config.json" ] || "$PY" benchmarks/make_qwen7b_shape.py "$q7" runs/demo-gpu/export/merged
  [ -f "$q7w4/config.json" ] || "$PY" benchmarks/make_qwen7b_shape.py "$q7w4" runs/demo-gpu/export/merged 128
  "$PY" benchmarks/serve_triton.py --merged "$q7" --work /tmp/st7 --runs 3 --in-process \
    --engines "${TRITON_ENGINES:-ferrylm-fused,ferrylm-w4a16}" --w4a16 "$q7w4" --out "$RESULTS/serve_triton_gpu_7b.json"
}

qlora() {
  local run=runs/demo-gpu-qlora
  rm -rf $run; mkdir -p $run; cp -a runs/demo-gpu/data $run/
  stage train run_dir=$run train.method=qlora train.max_steps=40 train.save_steps=0 train.compile=none \
    train.eval_batches=4
  cp $run/train/record.json "$RESULTS/qlora_train_record.json"
}

planner() {
  .venv/bin/python benchmarks/train_zero.py --work /tmp/ft --out "$RESULTS/planner_heldout.json" \
    lora-1gpu-compile-layers-ckpt25 lora-1gpu-liger-ckpt50 lora-1gpu-compile-layers-liger-mb2 lora-1gpu-compile-layers-r64
}

[ -d .venv-bwrap/usr/bin ] && export PATH="$PWD/.venv-bwrap/usr/bin:$PATH"
for step in "${@:-all}"; do
  case "$step" in
    install) install ;;
    data|train|export) stage "$step" ;;
    quant) quant ;;
    serve) serve ;;
    serve-vllm) serve_vllm ;;
    triton-7b) triton_7b ;;
    qlora) qlora ;;
    eval) stage eval; cp runs/demo-gpu/eval/report.md runs/demo-gpu/eval/report.json "$RESULTS/" ;;
    eval-triton)   # the same evaluation through tritonserver (the export's engine on the GPU), not in-process
      stage eval eval.local=false serve.backend=triton
      cp runs/demo-gpu/eval/report.md "$RESULTS/report_triton.md"; cp runs/demo-gpu/eval/report.json "$RESULTS/report_triton.json" ;;
    eval-vllm)     # the same evaluation through `ferrylm serve` on vLLM's CUDA build, not in-process
      stage eval eval.local=false serve.backend=vllm
      cp runs/demo-gpu/eval/report.md "$RESULTS/report_vllm.md"; cp runs/demo-gpu/eval/report.json "$RESULTS/report_vllm.json" ;;
    doctor) "${FERRYLM[@]}" doctor "${CONFIG[@]}" | tee "$RESULTS/doctor.txt" || true ;;
    planner) planner ;;
    all) install; stage data; stage train; stage export; stage eval
         cp runs/demo-gpu/eval/report.md runs/demo-gpu/eval/report.json "$RESULTS/"; planner ;;
    *) echo "studies/gpu_pipeline/gpu_pipeline.sh: unknown step '$step'" >&2; exit 2 ;;
  esac
done
