"""Where a decode step's time goes: CUDA kernels of 64 steps of `Engine` (--engine picks which) on Qwen2.5-7B shapes.

python3 studies/decode_kernels/gpu_decode_profile.py --out gpu_decode_profile.json [--engine fused-gemv|int4|int4-gemv]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--kernel-names", action="store_true", help="name inductor's kernels after what they fuse")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument(
        "--engine",
        default="tuned",
        choices=["tuned", "fused", "fused-gemv", "int4", "int4-gemv"],
        help="tuned: the transformers model, coordinate-descent tuning; fused: FusedDecoder on cuBLAS; "
        "fused-gemv: FusedDecoder on the Triton matrix-vector kernel (with PDL on Hopper); int4: "
        "W4A16 weights (group 128) on torch's int4 kernel; int4-gemv: on the 4-bit Triton kernel",
    )
    args = ap.parse_args()
    from ferrylm.engine import Engine
    from ferrylm.shapes import qwen7b_model

    model = qwen7b_model()
    prompt = list(range(1000, 1128))
    kwargs = {
        "tuned": {},
        "fused": {"fused": True, "tune": False},
        "fused-gemv": {"gemv": True, "tune": False},
        "int4": {"fused": True, "int4_group": 128},
        "int4-gemv": {"gemv": True, "tune": False, "int4_group": 128},
    }
    engine = Engine(model, max_len=128 + args.steps + 8, **kwargs[args.engine])
    if args.kernel_names:  # after Engine(), which sets it with its tuning; read when the step compiles
        import torch._inductor.config as inductor

        inductor.triton.unique_kernel_names = True
    for _ in range(2):
        engine.generate_timed(prompt, args.steps)
    wall = engine.generate_timed(prompt, args.steps)["total_s"]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        engine.generate_timed(prompt, args.steps)
    kernels = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kernels[e.name[:120]]
            k[0] += e.device_time_total
            k[1] += 1
    total_us = sum(v[0] for v in kernels.values())
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[: args.top]
    result = {
        "gpu": torch.cuda.get_device_name(),
        "engine": args.engine,
        "steps": args.steps,
        "wall_s": wall,
        "gpu_kernel_time_s": total_us / 1e6,
        "kernels_per_step": sum(v[1] for v in kernels.values()) / args.steps,
        "top": [{"kernel": k, "ms_total": v[0] / 1e3, "calls": v[1], "share": v[0] / total_us} for k, v in top],
    }
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
