#!/usr/bin/env bash
# The team recipe's speed on one GPU machine with no package index: Qwen2.5-Coder-1.5B from its GGUF, the second
# team's corpus at data.seed=2718 (as studies/nonfinite_steps: its carry and setup), its step split into parts
# (step_parts.py), then whole 110-step runs of the variants.
#
#   studies/nonfinite_steps/gpu_nan_steps.sh setup             # carry .whl and .st
#   studies/real_coder_forgetting/gpu_qwen_canary.sh part NN   # the GGUF's 24 pieces, one a call
#   studies/team_recipe_speed/gpu_speed.sh chain [VARIANT...]  # data, the parts, then one run per VARIANT, each a
#                                                              # list of overrides joined by commas (default below);
#                                                              # PARTS=0: the runs alone
#   studies/team_recipe_speed/gpu_speed.sh wait                # up to 9 minutes; results to $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
S=/tmp/speed
SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
RUN=(--config demo-gpu model.path=/tmp/q/model.gguf model.cache_dir=/tmp/cache "data.sources=[]"
  data.manifest=/tmp/st/corpus/manifest.yaml data.holdout_functions=0.6 "data.tasks=[generate,explain,file]"
  data.repo_files=0 data.max_chars=200000 data.max_file_bytes=400000 train.max_steps=110 train.canary_tasks=0
  data.seed=2718)
case "${1:-}" in
  chain)
    [ -f /tmp/q/model.gguf ] || { cat /tmp/q/p?? > /tmp/q/model.gguf && rm /tmp/q/p??; }
    echo "$SHA  /tmp/q/model.gguf" | sha256sum -c --quiet
    rm -rf /tmp/tree3 $S && mkdir -p /tmp/tree3 $S && tar --exclude=./.gg --exclude=./.whl --exclude=./.st -cf - . | tar -xf - -C /tmp/tree3
    echo "${@:2}" > $S/variants.txt && echo "${PARTS:-1}" > $S/parts.flag
    setsid nohup bash /tmp/tree3/studies/team_recipe_speed/gpu_speed.sh _chain > $S/chain.log 2>&1 < /dev/null & ;;
  _chain)
    PARTS=$(cat $S/parts.flag)
    t0=$SECONDS; python3 -m ferrylm data "${RUN[@]}" run_dir=$S/data > $S/data.log 2>&1; echo "data: $((SECONDS - t0)) s" >> $S/times.txt
    model=$(dirname "$(ls /tmp/cache/gguf/*/config.json | head -n 1)")
    t0=$SECONDS; [ "${PARTS:-1}" = 0 ] || python3 studies/team_recipe_speed/step_parts.py --run $S/data --model "$model" --out $S/parts.json \
      --variants padded:unfused padded:fused flat:unfused flat:fused > $S/parts.log 2>&1 || true
    echo "parts: $((SECONDS - t0)) s" >> $S/times.txt
    read -r -a V < $S/variants.txt
    [ ${#V[@]} -gt 0 ] || V=(train.fused_head=true train.fused_head=true,train.flatten_batches=true)
    for v in "${V[@]}"; do
      name=$(echo "$v" | tr -c 'a-z0-9\n' '_'); mkdir -p $S/$name && cp -r $S/data/data $S/$name/
      t0=$SECONDS; python3 -m ferrylm train "${RUN[@]}" run_dir=$S/$name ${v//,/ } > $S/$name.train.log 2>&1 || echo "$name: exit $?" >> $S/times.txt
      echo "$name: $((SECONDS - t0)) s" >> $S/times.txt
    done
    echo done >> $S/times.txt ;;
  wait)
    for _ in $(seq "${WAIT_POLLS:-108}"); do grep -q '^done' $S/times.txt 2> /dev/null && break; sleep 5; done
    cat $S/times.txt $S/parts.log 2> /dev/null | grep -v WARN | tail -n 20 || true  # no parts.log with PARTS=0
    grep -h "error\|skipped" $S/*.train.log | cut -c1-300 || true
    mkdir -p "$OUT" && (cd $S && tar czf "$OUT/speed.tgz" $(ls -d times.txt parts.json parts.log *.train.log \
      */train/record.json */train/log_history.jsonl 2> /dev/null)) || true ;;
  *) echo "usage: $0 chain [VARIANT...] | wait" >&2; exit 2 ;;
esac
