"""The 4-bit Triton kernel's engine on the Qwen2.5-7B shape (random weights, W4A16 group 128), each phase
of its start-up timed as it ends, then 512-token decodes: where the start-up goes when it is slow.

    python3 studies/decode_kernels/gemv4_decode_phases.py OUT.json compile          # the step captured into a CUDA graph, tuned kernels
    python3 studies/decode_kernels/gemv4_decode_phases.py OUT.json eager            # no compile: a Python launch per kernel
    python3 studies/decode_kernels/gemv4_decode_phases.py OUT.json compile fixed    # one fixed configuration, no tuning
"""

import json
import sys
import time
from pathlib import Path

import torch

import ferrylm.engine.tuning.choose as tuning
from ferrylm.engine import Engine
from ferrylm.shapes import qwen7b_model

t = time.perf_counter()


def lap(what: str) -> None:
    global t
    now = time.perf_counter()
    print(f"{what}: {now - t:.1f} s", flush=True)
    t = now


def timed_tune4(layer, pdl=False, epilogue=tuning.Epilogue()):
    t0 = time.perf_counter()
    cfg = TUNE4(layer, pdl, epilogue)
    print("  tune4", layer.out_features, layer.in_features, cfg, f"{time.perf_counter() - t0:.1f} s", flush=True)
    return cfg


TUNE4, tuning.tune4 = tuning.tune4, timed_tune4
model = qwen7b_model()
lap("model")
ids = torch.randint(100, 150000, (1, 128), generator=torch.Generator().manual_seed(1)).cuda()
fixed = {"block_n": 4, "block_k": 1024, "num_warps": 4, "num_stages": 1} if sys.argv[3:] == ["fixed"] else None
engine = Engine(
    model,
    max_len=128 + 512 + 8,
    gemv=True,
    tune=False,
    int4_group=128,
    compile=sys.argv[2] == "compile",
    gemv_fixed=fixed,
)
lap("engine (4-bit layers, tuning)")
with torch.no_grad():
    engine.decoder(ids, torch.arange(ids.shape[1], device=ids.device))
torch.cuda.synchronize()
lap("prefill alone, eager")
engine.generate_timed(ids[0].tolist(), 8)
lap("generate 8 tokens")
engine.generate_timed(ids[0].tolist(), 512)
lap("first generate 512")
engine.generate_timed(ids[0].tolist(), 512)
lap("second generate")
runs = [engine.generate_timed(ids[0].tolist(), 512)["total_s"] for _ in range(3)]
print("runs", runs, flush=True)
Path(sys.argv[1]).write_text(
    json.dumps(
        {
            "gpu": torch.cuda.get_device_name(),
            "runs_s": runs,
            "configs": {str(k): v for k, v in engine.gemv_configs.items()},
        },
        indent=1,
    )
)
