#!/usr/bin/env bash
# The finder before the constant-body checks (a checkout of 55b3da7's ferrylm/ at $1) and now (this tree), each
# project of the GPU preset found by both at once, so both meet the same load (a GPU machine's spare cores,
# beside a training run). Results: /tmp/fba/{before,after}_NAME.json and /tmp/fba/log.txt; /tmp/fba/done at the end.
#   studies/own_code_free_passes/before_after.sh /tmp/old   # after gpu_qwen_canary.sh setup (its /tmp/projs, /tmp/site)
set -uo pipefail
cd "$(dirname "$0")/../.."
OLD=$1 NEW=$PWD MANIFEST=/tmp/projs/manifest.yaml
export PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/projs/w PATH=/tmp/bw/usr/bin:$PATH
mkdir -p /tmp/fba
for name in $(python3 -c "import yaml; print(' '.join(r['name'] for r in yaml.safe_load(open('$MANIFEST'))['repositories']))"); do
  for side in before after; do
    tree=$([ $side = before ] && echo "$OLD" || echo "$NEW")
    PYTHONPATH=/tmp/site:$tree timeout 1500 python3 "$NEW/studies/own_code_free_passes/find_all.py" "$MANIFEST" \
      --only "$name" --limit 40 --code "$side" --out "/tmp/fba/${side}_$name.json" >> /tmp/fba/log.txt 2>&1 &
  done
  wait
done
touch /tmp/fba/done
