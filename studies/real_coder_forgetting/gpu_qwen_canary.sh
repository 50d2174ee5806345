#!/usr/bin/env bash
# Qwen2.5-Coder-1.5B-Instruct from its GGUF through the product's own commands on one GPU machine with no
# package index: data -> LoRA with the general-coding canary (train.canary_tasks) -> merged export -> eval
# (HumanEval without the canary's tasks, fine-tuned against the base). Answers: does the demo-gpu recipe
# forget, does the canary see it, does the report lead with it.
#
#   studies/real_coder_forgetting/gpu_qwen_canary.sh setup            # wheels from .whl/ into /tmp/site, bubblewrap's .deb unpacked
#   studies/real_coder_forgetting/gpu_qwen_canary.sh part NN          # .gg/pNN (a 48 MB piece of the GGUF; MODEL=0.5b: .gg05/pNN) copied to /tmp/q
#   studies/real_coder_forgetting/gpu_qwen_canary.sh train            # the pieces joined and checked, then data and train (in the background;
#                                             # the repository tasks found beside training and kept for the eval)
#   studies/real_coder_forgetting/gpu_qwen_canary.sh eval             # export (merged) and eval (in the background)
#   studies/real_coder_forgetting/gpu_qwen_canary.sh all              # train's steps and eval's in one background chain
#   studies/real_coder_forgetting/gpu_qwen_canary.sh w4a16 V...       # data, train, export, then each W4A16 variant V
#                                             # (studies/w4a16_choice/w4a16_variants.py) against the merged model
#                                             # (MERGED_PASSED=FILE: its column from an earlier sweep, not asked again)
#   studies/real_coder_forgetting/gpu_qwen_canary.sh probe [DIR[:REQ]...]  # the base asked with the signature alone and
#                                             # with the file (studies/unseen_projects/repo_context_probe.py, background):
#                                             # the run's own tasks once `train` has found them, or DIRs' tasks;
#                                             # PROBE_SETTINGS="file file-below": the window with room below the hole;
#                                             # PROBE_FILE_PASSED=PASSED_JSON: an earlier run's base stands for "file"
#   studies/real_coder_forgetting/gpu_qwen_canary.sh prefind JSON      # the own-code tasks found from a split made here (a data
#                                             # run's repositories.json, the same ARGS) while the GGUF is carried
#   studies/real_coder_forgetting/gpu_qwen_canary.sh cache TGZ          # tasks a run found before (`wait` brings them back as
#                                             # $TAG.repo_tasks.tgz), read back where the finder's code and the projects match
#   studies/real_coder_forgetting/gpu_qwen_canary.sh hx data|jdk.pNN|install  # HumanEval-X's data and Debian's JDK (.tc/)
#   studies/real_coder_forgetting/gpu_qwen_canary.sh keep 0|1        # the trained adapter and its train record to $OUT in 15 MB
#                                             # pieces (0: the first four, 1: the rest; a call brings back 8 files, 64 MiB)
#   studies/real_coder_forgetting/gpu_qwen_canary.sh restore         # the kept pieces carried in .adapter/ (carry.sh adapter DIR...)
#                                             # unpacked under /tmp/$TAG once all are there; `all` and `w4a16` then skip training
#   studies/real_coder_forgetting/gpu_qwen_canary.sh wait train|eval  # up to 9 minutes for that step; the records, report, log and
#                                             # samples to $OUT/$TAG.tgz (a W4A16 sweep's replies: $TAG.replies.tgz)
#   studies/real_coder_forgetting/gpu_qwen_canary.sh recut            # short of time: TAG's chain ends with its training, then
#                                             # export and eval run with this call's ARGS (fewer columns; `wait eval`)
#   studies/real_coder_forgetting/gpu_qwen_canary.sh stop OTHER        # every process of run OTHER ended (a chain given up)
#
# TAG names a run (default "run": /tmp/run); two tags' steps may overlap (one's eval beside the other's training;
# AFTER=TAG holds this run's training until that tag's has ended, its data stage running meanwhile).
# Make the pieces here: carry.sh gg (its SHA-256: ferrylm/gguf.py)
# ARGS: extra dotted overrides for every stage. The demo-gpu preset's recipe is the default; the earlier rows of
# docs/performance.md ran before it took them: ARGS="data.answer=body train.drift_penalty=0" (+ the row's own keys).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/bw/usr/bin:$PATH PYTHONUNBUFFERED=1
# test requirements from the carried wheels alone (no index there)
export PIP_NO_INDEX=1 PIP_FIND_LINKS=${PIP_FIND_LINKS:-/tmp/projs/w}
read -r -a EXTRA <<< "${ARGS:-}"
TAG=${TAG:-run}
R=/tmp/$TAG
RUN=(--config demo-gpu model.path=/tmp/q/model.gguf model.cache_dir=/tmp/cache run_dir=$R
  "data.sources=[stdlib]" data.max_pairs=2000 train.compile=none train.max_steps=220 train.save_steps=55
  train.canary_tasks=40 eval.local=true "eval.benchmarks=[humaneval]" eval.few_shot=0
  eval.bleu_limit=16 eval.latency_runs=1 "eval.latency_concurrency=[]" export.onnx=false "export.vllm_quantize=[]"
  "${EXTRA[@]}")
# MODEL=0.5b: Qwen2.5-Coder-0.5B-Instruct from .gg05's 11 pieces (carry.sh gg with MODEL=qwen2.5-coder-0.5b)
SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 GG=.gg
[ "${MODEL:-1.5b}" = 1.5b ] || { SHA=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 GG=.gg05; }
GO_SHA=545123039b6c79e75cf2d86528781a825424cf33ce9d3f4513d772d7144cd531  # golang-1.19-go 1.19.8-2 (carry.sh go)
GO_SRC_SHA=2dfa82fe4f08f4e0193c532e561af4c91871f5235608f04f2bb8d57bb288df5a  # golang-1.19-src 1.19.8-2
# background steps run from a copy made at `setup`: every later call re-copies the working tree under them
# (a finding that read ferrylm/ during the carry calls once met its files missing)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}  # the task cache's root (eval/repo/task_cache.py)
BG=/tmp/tree/studies/real_coder_forgetting/$(basename "$0")
case "${1:-}" in train | all | eval | recut | probe | prefind | w4a16) [ "$PWD" = /tmp/tree ] || exec bash "$BG" "$@" ;; esac

stage() {
  local t0=$SECONDS
  if [ "$1" = tasks_done ]; then  # the eval reads what the finding beside training kept
    while [ -f "$R.tasks.log" ] && [ ! -f "$R.tasks.done" ]; do sleep 5; done
    echo "tasks found beside training: $(cat "$R.tasks.done" 2>/dev/null)" | tee -a "$R.times.txt"
    return 0
  fi
  if [ "$1" = train ] && [ -n "${AFTER:-}" ]; then  # AFTER=TAG: train once that tag has (one training at a time on the GPU)
    while ! grep -q "^ferrylm train:" "/tmp/$AFTER.times.txt" 2>/dev/null && [ ! -f "/tmp/$AFTER.data.done" ]; do sleep 5; done
  fi
  python3 -m ferrylm "$1" "${RUN[@]}" || return 1
  echo "ferrylm $1: $((SECONDS - t0)) s" | tee -a "$R.times.txt"
}

# whether process $1 belongs to run $2 (the TAG its chain was started with)
of() { { tr '\0' '\n' < "/proc/$1/environ"; } 2> /dev/null | grep -qx "TAG=$2"; }

# the training step, or none where `restore` unpacked a kept adapter (the data stage, deterministic, runs again)
trained() { [ -f "$R.restored" ] && echo "" || echo train; }

case "${1:-}" in
  setup)
    rm -rf /tmp/tree && mkdir -p /tmp/tree
    tar --exclude=./.gg --exclude=./.gg05 --exclude=./.whl --exclude=./.proj --exclude=./.tc -cf - . | tar -xf - -C /tmp/tree
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    dpkg -x .whl/bubblewrap_*.deb /tmp/bw
    [ ! -d .proj ] || cp -r .proj /tmp/projs  # projects with their tests and a manifest, for the own-code tracks
    python3 -c "import ferrylm.data.stage, ferrylm.train.recipe, ferrylm.export.stage, ferrylm.eval.stage, ferrylm.train.canary"
    bwrap --version && nvidia-smi -L ;;
  part) mkdir -p /tmp/q && cp "$GG/p$2" /tmp/q/ && ls /tmp/q | wc -l ;;
  train)
    [ -f /tmp/q/model.gguf ] || { cat /tmp/q/p?? > /tmp/q/model.gguf && rm /tmp/q/p??; }
    echo "$SHA  /tmp/q/model.gguf" | sha256sum -c --quiet
    # a step outlives the call that starts it (the machine stays while calls follow within 30 s)
    setsid nohup bash -c "$0 _run data tasks train" > "$R.train.log" 2>&1 < /dev/null & ;;
  all)  # train's steps, then eval's, in one chain (`wait train` waits for all of it)
    [ -f /tmp/q/model.gguf ] || { cat /tmp/q/p?? > /tmp/q/model.gguf && rm /tmp/q/p??; }
    echo "$SHA  /tmp/q/model.gguf" | sha256sum -c --quiet
    setsid nohup bash -c "$0 _run data tasks $(trained) export tasks_done eval" > "$R.train.log" 2>&1 < /dev/null & ;;
  eval) setsid nohup bash -c "$0 _run export tasks_done eval" > "$R.eval.log" 2>&1 < /dev/null & ;;
  recut)  # the chain's shell ended (its training runs on); export and eval start from the train record
    for p in $(pgrep -f "_run data tasks"); do of "$p" "$TAG" && kill "$p"; done
    setsid nohup bash -c "while [ ! -f $R/train/record.json ]; do sleep 2; done; $0 _run export tasks_done eval" \
      > "$R.eval.log" 2>&1 < /dev/null & ;;
  stop) for p in $(pgrep -f .); do [ "$p" = $$ ] || ! of "$p" "$2" || kill -9 "$p" 2> /dev/null || true; done ;;
  w4a16)  # `wait train` waits for it; the variants' table comes back as $TAG.variants.json
    [ -f /tmp/q/model.gguf ] || { cat /tmp/q/p?? > /tmp/q/model.gguf && rm /tmp/q/p??; }
    echo "$SHA  /tmp/q/model.gguf" | sha256sum -c --quiet
    echo "${@:2}" > "$R.variants.txt"
    setsid nohup bash -c "$0 _run data $(trained) export variants" > "$R.train.log" 2>&1 < /dev/null & ;;
  probe)  # the run's own tasks once found beside training (no DIR), or DIRs'
    if [ $# -eq 1 ]; then
      setsid nohup bash -c "while [ ! -f $R.tasks.done ]; do sleep 5; done; python3 studies/unseen_projects/repo_context_probe.py \
        --run $(printf '%q ' "${RUN[@]:2}") --settings ${PROBE_SETTINGS:-none file} --out /tmp/$TAG.probe.json \
        ${PROBE_FILE_PASSED:+--file-passed $PROBE_FILE_PASSED}" \
        > "/tmp/$TAG.probe.log" 2>&1 < /dev/null &
      exit 0
    fi
    model=$(dirname "$(ls /tmp/cache/*/config.json | head -n 1)")
    setsid nohup python3 studies/unseen_projects/repo_context_probe.py "${@:2}" --model "$model" --limit 40 \
      --out "/tmp/$TAG.probe.json" > "/tmp/$TAG.probe.log" 2>&1 < /dev/null & ;;
  keep)  # after training: the adapter as the run wrote it, its record and loss history, so a later machine asks the same model
    K=/tmp/$TAG.keep
    [ -f "$R/train/record.json" ] || { echo "no trained adapter in $R/train yet" >&2; exit 1; }
    if [ ! -f "$K/$TAG.adapter.sha256" ]; then
      mkdir -p "$K" && tar czf - -C /tmp "$TAG/train/record.json" "$TAG/train/log_history.jsonl" "$TAG/train/adapter" | split -b 15000000 -d -a 2 - "$K/$TAG.adapter.tgz.p"
      cat "$K"/*.p?? | sha256sum | cut -d' ' -f1 > "$K/$TAG.adapter.sha256"
    fi
    mkdir -p "$OUT" && cp "$K/$TAG.adapter.sha256" "$OUT/"
    find "$K" -name '*.p??' | sort | sed -n "$((4 * $2 + 1)),$((4 * $2 + 4))p" | xargs -r cp -t "$OUT"
    ls "$OUT" ;;
  restore)  # .adapter/ holds TAG.adapter.sha256 and pieces; carried over several calls, each ends with `restore`
    mkdir -p /tmp/kept && cp .adapter/* /tmp/kept/
    sum=$(cat /tmp/kept/"$TAG".adapter.sha256)
    if [ "$(cat /tmp/kept/"$TAG".adapter.tgz.p?? | sha256sum | cut -d' ' -f1)" = "$sum" ]; then
      cat /tmp/kept/"$TAG".adapter.tgz.p?? | tar xzf - -C /tmp && touch "$R.restored" && echo "restored: $(ls "$R/train")"
    else echo "kept adapter: $(ls /tmp/kept | wc -l) files so far, not yet whole"; fi ;;
  cache) mkdir -p "$CACHE" && tar xzf "$2" -C "$CACHE" && ls "$CACHE/ferrylm/repo-tasks" | wc -l ;;
  hx)  # HumanEval-X here: `hx data` (.tc/humaneval-x, .tc/jre.deb, .tc/jdk.sha256 carried), `hx jdk.p00`, `hx jdk.p01`
        # (the JDK's .deb in 48 MB pieces: a piece and the tree within one carry), `hx install`: Debian's JDK where
        # javac is missing (as root; links made if its scripts could not), checked against the sum carry.sh tc wrote
    mkdir -p /tmp/hx
    case "$2" in
      data) cp -r .tc/humaneval-x .tc/jre.deb .tc/jdk.sha256 /tmp/hx/ ;;
      jdk.p*) cp ".tc/$2" /tmp/hx/ ;;
      install)
        if [ ! -x /usr/bin/javac ]; then
          cat /tmp/hx/jdk.p?? > /tmp/hx/jdk.deb
          echo "$(cat /tmp/hx/jdk.sha256)  /tmp/hx/jdk.deb" | sha256sum -c --quiet
          dpkg -i --force-depends /tmp/hx/jre.deb /tmp/hx/jdk.deb > /tmp/hx/dpkg.log 2>&1 || tail -n 5 /tmp/hx/dpkg.log
          for t in java javac; do [ -e /usr/bin/$t ] || ln -s /usr/lib/jvm/java-17-openjdk-amd64/bin/$t /usr/bin/$t; done
        fi ;;
    esac
    for t in g++ javac java go rustc cargo; do echo "$t: $(command -v $t || echo missing)"; done ;;
  go)  # Go for the Go projects' tests: `go p00`, `go p01` (Debian's golang-1.19-go in pieces, its -src beside the
        # last or alone: `go src`; carry.sh go), `go install` (unpacked into /, as root, where go is missing)
    mkdir -p /tmp/go
    case "$2" in
      p*) cp .tc/go.$2 /tmp/go/ && { [ ! -f .tc/go-src.deb ] || cp .tc/go-src.deb /tmp/go/; } ;;
      src) cp .tc/go-src.deb /tmp/go/ ;;  # carried alone where a piece and it together pass the carry's limit
      install)
        if ! command -v go > /dev/null; then
          cat /tmp/go/go.p?? > /tmp/go/go.deb
          echo "$GO_SHA  /tmp/go/go.deb" | sha256sum -c --quiet && echo "$GO_SRC_SHA  /tmp/go/go-src.deb" | sha256sum -c --quiet
          dpkg -x /tmp/go/go.deb / && dpkg -x /tmp/go/go-src.deb / && ln -sf /usr/lib/go-1.19/bin/go /usr/bin/go
        fi
        go version ;;
    esac ;;
  _run)
    for s in "${@:2}"; do
      if [ "$s" = variants ]; then
        read -r -a V < "$R.variants.txt"
        python3 studies/w4a16_choice/w4a16_variants.py --run "$R" --preset demo-gpu --variants "${V[@]}" \
          --out "/tmp/$TAG.variants.json" ${MERGED_PASSED:+--merged-passed "$MERGED_PASSED"} -- "${RUN[@]:2}" || { echo "failed: variants" > "$R.$2.done"; exit 1; }
        continue
      fi
      if [ "$s" = tasks ]; then  # the repository tasks found beside training, kept for the eval (eval.repo_task_cache)
        setsid nohup bash -c "$0 _tasks" > "$R.tasks.log" 2>&1 < /dev/null &
        continue
      fi
      stage "$s" || { echo "failed: $s" > "$R.$2.done"; exit 1; }
    done
    echo ok > "$R.$2.done" ;;
  prefind)  # the tasks found from a split made elsewhere ($2: a data run's repositories.json, this run's seed and
            # manifest) while the GGUF is still carried; the run's own finding then reads them from the task cache
    setsid nohup bash -c "REPOS=$2 $0 _tasks; [ -f $R.prefind.done ] || echo failed > $R.prefind.done" \
      > "$R.prefind.log" 2>&1 < /dev/null & ;;
  _tasks)
    if [ -z "${REPOS:-}" ]; then  # this tag's finding from a split first; a tag with none waits for every tag's
      # (another lever's run finds the same tasks: found twice at once, each costs twice)
      logs=$(ls "$R.prefind.log" 2> /dev/null || ls /tmp/*.prefind.log 2> /dev/null || true)
      for log in $logs; do while [ ! -f "${log%.log}.done" ]; do sleep 5; done; done
    fi
    done_file=$R.tasks.done; [ -z "${REPOS:-}" ] || done_file=$R.prefind.done
    python3 - "${RUN[@]:2}" <<'PY' && echo ok > "$done_file" || echo failed > "$done_file"
import os, sys, time
from ferrylm.config.loader import load_config
from ferrylm.eval.tasks import own_code
from ferrylm.log import setup_logging
from ferrylm.manifest import read_record

setup_logging()
cfg, t0 = load_config("demo-gpu", sys.argv[1:]), time.time()
found = {"repositories": os.environ["REPOS"]} if os.environ.get("REPOS") else read_record(cfg.stage_dir("data"))["outputs"]
tracks = own_code.tracks(cfg.eval, found) if "own-code" in cfg.eval.benchmarks else []
print({t.title: len(t.problems) for t in tracks}, f"found in {time.time() - t0:.0f} s")
PY
    ;;
  wait)
    first=$([ "$2" = train ] && echo data || echo export)
    # until the chain ends (its .done, or no step of it left running: a failed start never writes one)
    for _ in $(seq "${WAIT_POLLS:-108}"); do
      [ -f "$R.$first.done" ] && break; pgrep -f "_run $first" > /dev/null || break; sleep 5
    done
    tail -n 25 "$R.$2.log"; cat "$R.$first.done" 2>/dev/null || echo "still running"
    mkdir -p "$OUT"
    (cd /tmp && tar czf "$OUT/$TAG.tgz" --ignore-failed-read "$TAG".*.txt "$TAG".*.log "$TAG".*.json "$TAG"/*/record.json "$TAG"/data/repositories.json "$TAG"/eval/report.json \
      "$TAG"/eval/report.md "$TAG"/eval/report.html "$TAG"/eval/*.jsonl "$TAG"/train/log_history.jsonl 2>/dev/null) || true
    [ ! -d "$CACHE/ferrylm/repo-tasks" ] || tar czf "$OUT/$TAG.repo_tasks.tgz" -C "$CACHE" ferrylm/repo-tasks
    # a W4A16 sweep's replies and results, so those the machine leaves unexecuted run elsewhere (execute_replies.py)
    [ ! -d "$R/w4a16_variants" ] || (cd /tmp && tar czf "$OUT/$TAG.replies.tgz" "$TAG"/w4a16_variants/*.jsonl) ;;
  *) echo "usage: $0 setup | part NN | cache TGZ | prefind JSON | train | eval | recut | stop TAG | all | w4a16 V... | probe [DIR...] | hx data|jdk.pNN|install | keep 0|1 | restore | wait train|eval" >&2; exit 2 ;;
esac
