#!/usr/bin/env bash
# The team recipe on a second team's corpus (Qwen2.5-Coder-1.5B from its GGUF, one GPU machine with no package
# index): the run that stopped on a NaN gradient at step 53 (data.seed=2718), again with the fix and with the
# cuDNN kernels let back in, and seed 13435. Made here first: carry.sh whl and gg (studies/real_coder_forgetting),
# and the corpus: bash ../shared/corpora/second-team/fetch.sh .st/corpus (.st/ ignored by git).
#
#   studies/nonfinite_steps/gpu_nan_steps.sh setup    # carry .whl and .st: wheels, the corpus, the GPU test of the fault
#   studies/real_coder_forgetting/gpu_qwen_canary.sh part NN   # the GGUF's 24 pieces, one a call
#   studies/nonfinite_steps/gpu_nan_steps.sh chain    # in the background: data at both seeds, then one training at a
#                                                     # time: 2718, 13435, 2718 with train.sdpa_cudnn=true
#   studies/nonfinite_steps/gpu_nan_steps.sh wait     # up to 9 minutes; logs, records and loss histories to $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
N=/tmp/nan
SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
RUN=(--config demo-gpu model.path=/tmp/q/model.gguf model.cache_dir=/tmp/cache "data.sources=[]"
  data.manifest=/tmp/st/corpus/manifest.yaml data.holdout_functions=0.6 "data.tasks=[generate,explain,file]"
  data.repo_files=0 data.max_chars=200000 data.max_file_bytes=400000 train.max_steps=110 train.canary_tasks=0)
stage() {  # stage, run name, seed, more overrides
  local t0=$SECONDS
  python3 -m ferrylm "$1" "${RUN[@]}" run_dir=$N/$2 data.seed=$3 "${@:4}" > "$N/$2.$1.log" 2>&1 || echo "$2 $1: exit $?" >> $N/times.txt
  echo "$2 $1: $((SECONDS - t0)) s" >> $N/times.txt
}
case "${1:-}" in
  setup)
    bash studies/real_coder_forgetting/gpu_qwen_canary.sh setup
    rm -rf /tmp/st && mkdir -p /tmp/st && cp -r .st/corpus /tmp/st/
    python3 -m pytest -q -p no:cacheprovider tests/train/test_nonfinite.py -k gpu -rs 2>&1 | tail -n 5
    python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" ;;
  chain)
    [ -f /tmp/q/model.gguf ] || { cat /tmp/q/p?? > /tmp/q/model.gguf && rm /tmp/q/p??; }
    echo "$SHA  /tmp/q/model.gguf" | sha256sum -c --quiet
    rm -rf /tmp/tree2 && mkdir -p /tmp/tree2 $N && tar --exclude=./.gg --exclude=./.whl --exclude=./.st -cf - . | tar -xf - -C /tmp/tree2
    setsid nohup bash /tmp/tree2/studies/nonfinite_steps/gpu_nan_steps.sh _chain > $N/chain.log 2>&1 < /dev/null & ;;
  _chain)
    stage data s2718 2718
    stage data s13435 13435 &
    stage train s2718 2718
    wait
    stage train s13435 13435
    mkdir -p $N/s2718c && cp -r $N/s2718/data $N/s2718c/
    stage train s2718c 2718 train.sdpa_cudnn=true
    sha256sum $N/s*/data/train.arrow >> $N/times.txt
    echo done >> $N/times.txt ;;
  wait)
    for _ in $(seq "${WAIT_POLLS:-108}"); do grep -q '^done' $N/times.txt 2> /dev/null && break; sleep 5; done
    cat $N/times.txt; grep -h "skipped\|gradient norm\|error" $N/*.train.log | cut -c1-600 || true
    tail -n 3 $N/*.train.log | cut -c1-400
    mkdir -p "$OUT" && (cd $N && tar czf "$OUT/nan_steps.tgz" --ignore-failed-read times.txt chain.log *.log */train/record.json \
      */train/log_history.jsonl */data/record.json */data/stats.json 2> /dev/null) || true ;;
  *) echo "usage: $0 setup | chain | wait" >&2; exit 2 ;;
esac
