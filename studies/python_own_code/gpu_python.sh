#!/usr/bin/env bash
# Python's held-out functions on two corpora, Qwen2.5-Coder-1.5B: the team recipe (docs/train.md) trained on each,
# the base and the fine-tuned model asked for the same held-out functions with the file shown, every reply kept so
# the failures can be read (failed_tasks.py). Made here first: studies/real_coder_forgetting/carry.sh whl, gg and proj.
#
#   studies/python_own_code/gpu_python.sh corpus   # here: the second corpus into .st/corpus, pydash given a test command
#   studies/python_own_code/gpu_python.sh split    # here: each corpus's split by the data stage with the same keys
#                                                  # (.proj/split_team.json, .st/corpus/split_second.json)
#   studies/python_own_code/gpu_python.sh setup    # carry .whl .proj .st: wheels, the team's projects, the second corpus;
#                                                  # both corpora's tasks found from the splits while the GGUF is carried
#                                                  # (the team corpus 882 s on 16 cores beside training; read back from a
#                                                  # results/*/TAG.repo_tasks.tgz of a run with the same finder)
#   studies/real_coder_forgetting/gpu_qwen_canary.sh part NN   # the GGUF's 24 pieces, one a call (carry .gg/pNN)
#   studies/python_own_code/gpu_python.sh chain    # both corpora in the background: data and task finding at once,
#                                                  # one training at a time (team, then second), export, eval
#   studies/python_own_code/gpu_python.sh wait TAG # up to 9 minutes for run TAG (team, second); its replies to $OUT
#
# LEVER="dotted overrides" adds a lever to both runs (TAG_SUFFIX names them apart); TEAM_ONLY=1 or SECOND_ONLY=1: one
# corpus alone (setup, chain); AFTER=TAG holds the chain's first training until run TAG's has ended (a second lever's
# chain behind the first's).
set -euo pipefail
cd "$(dirname "$0")/../.."
CANARY=studies/real_coder_forgetting/gpu_qwen_canary.sh
# pydash's pytest configuration asks for coverage plugins its sdist does not ship: a team gives its entry the
# command its tests run with (the manifest's `test:`)
PYDASH_TEST="python -m pytest -q -p no:cacheprovider -o addopts= --ignore=tests/pytest_mypy_testing tests"
# the recipe on both corpora; the eval asks the base and the fine-tuned model, own code alone, no retrieval
T="data.sources=[] data.seed=13435 data.holdout_functions=0.6 data.tasks=[generate,explain,file] data.repo_files=0"
T+=" data.max_chars=200000 data.max_file_bytes=400000 train.max_steps=110 train.canary_tasks=0 eval.benchmarks=[own-code]"
T+=" eval.retrieval_k=0 eval.exec_workers=8 eval.repo_task_limit=8 eval.latency_runs=0 eval.bleu_limit=8 ${LEVER:-}"
S=${TAG_SUFFIX:-}
export PIP_FIND_LINKS="/tmp/projs/w /tmp/st/corpus/w"  # both corpora's test requirements, as wheels
case "${1:-}" in
  corpus)
    [ -f .st/corpus/manifest.yaml ] || bash ../shared/corpora/second-team/fetch.sh .st/corpus
    grep -qx "/.st/" .git/info/exclude || echo "/.st/" >> .git/info/exclude
    sed -i "s|{path: pydash-8.1.0, name: pydash}|{path: pydash-8.1.0, name: pydash, test: \"$PYDASH_TEST\"}|" .st/corpus/manifest.yaml
    grep pydash .st/corpus/manifest.yaml ;;
  split)  # the data stage on this machine, the corpora seen where the GPU machine sees them (/tmp/projs, /tmp/st)
    GGUF=$(.venv/bin/python -c "from ferrylm.gguf import embedded_gguf; from ferrylm.models import cache_root
print(embedded_gguf('qwen2.5-coder-1.5b', cache_root()))")
    ln -sfn "$PWD/.proj" /tmp/projs && mkdir -p /tmp/st && ln -sfn "$PWD/.st/corpus" /tmp/st/corpus
    for run in "team /tmp/projs .proj" "second /tmp/st/corpus .st/corpus"; do
      read -r tag at here <<< "$run"
      .venv/bin/python -m ferrylm data --config demo-gpu model.path="$GGUF" run_dir=/tmp/split_$tag "data.sources=[stdlib]" \
        data.max_pairs=2000 $T data.manifest=$at/manifest.yaml > /tmp/split_$tag.log 2>&1
      sed "s|$(realpath $here)|$at|g" /tmp/split_$tag/data/repositories.json > $here/split_$tag.json
    done ;;
  setup)
    bash $CANARY setup
    # tasks earlier runs found (results/*/*.repo_tasks.tgz): read back where the finder's code and the projects match
    for t in studies/python_own_code/results/*/*.repo_tasks.tgz; do [ ! -f "$t" ] || bash $CANARY cache "$t"; done
    rm -rf /tmp/st && mkdir -p /tmp/st && cp -r .st/corpus /tmp/st/ && grep -c "test:" /tmp/st/corpus/manifest.yaml
    [ -n "${SECOND_ONLY:-}" ] || TAG=team$S ARGS="$T data.manifest=/tmp/projs/manifest.yaml" bash $CANARY prefind /tmp/projs/split_team.json
    [ -n "${TEAM_ONLY:-}" ] || TAG=second$S ARGS="$T data.manifest=/tmp/st/corpus/manifest.yaml" bash $CANARY prefind /tmp/st/corpus/split_second.json ;;
  found)  # how far the finding from the splits has come
    tail -n 2 /tmp/team$S.prefind.log /tmp/second$S.prefind.log; cat /tmp/*.prefind.done 2> /dev/null || true ;;
  chain)
    [ -n "${SECOND_ONLY:-}" ] || TAG=team$S ARGS="$T data.manifest=/tmp/projs/manifest.yaml" bash $CANARY all
    [ -n "${SECOND_ONLY:-}" ] || export AFTER=team$S  # one training at a time: the second corpus's after the team's
    [ -n "${TEAM_ONLY:-}" ] || TAG=second$S ARGS="$T data.manifest=/tmp/st/corpus/manifest.yaml" bash $CANARY all
    sleep 20 && tail -n 3 /tmp/team$S.train.log /tmp/second$S.train.log 2> /dev/null || true ;;
  wait) TAG=$2 bash $CANARY wait train ;;
  *) echo "usage: $0 corpus | split | setup | found | chain | wait TAG" >&2; exit 2 ;;
esac
