"""The 4-bit layers' prompt product (`gemv4.prompt4`: integers through the tensor cores, scales after
each group) against what it replaced, F.linear in fp32 on the weight dequantized first, per
Qwen2.5-7B layer shape for a 128-token prompt, on a GPU.

    python3 studies/decode_kernels/prompt4.py --out prompt4_h100.json [--sweep]

`--sweep` also times each shape at block_m 64/128, block_n 64/128/256 and 4 or 8 warps (each checked
against the fp32 product first).

Round-to-nearest 4-bit weights (group 128) of random bf16 matrices, bf16 x; times from
triton.testing.do_bench; the error is the largest difference from the fp32 product over its largest value.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import torch

from ferrylm.shapes import LAYER


def sweep(x, packed, scales, want) -> list[dict]:
    """prompt4 at each configuration, fastest first."""
    from triton.runtime.errors import OutOfResources
    from triton.testing import do_bench

    from ferrylm.engine.kernels.gemv4 import prompt4

    out = []
    for bm, bn, nw in itertools.product((64, 128), (64, 128, 256), (4, 8)):
        cfg = dict(block_m=bm, block_n=bn, num_warps=nw)
        try:
            got = prompt4(x, packed, scales, 128, **cfg)
        except OutOfResources:
            continue
        err = ((got - want).abs().max() / want.abs().max()).item()
        out.append({**cfg, "rel_error": err, "ms": do_bench(lambda: prompt4(x, packed, scales, 128, **cfg))})
    return sorted(out, key=lambda r: r["ms"])


def main() -> None:
    from triton.testing import do_bench

    from ferrylm.engine.kernels.gemv4 import dequantize, pack_int4, prompt4
    from ferrylm.engine.kernels.int4 import round_to_nearest_int4

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = {}
    for name, (n, k) in zip(("wqkv", "wo", "w13", "w2"), LAYER):
        q, s = round_to_nearest_int4(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02, 128)
        packed, scales = pack_int4(q, s)
        x = torch.randn(args.tokens, k, device="cuda", dtype=torch.bfloat16)
        want = torch.nn.functional.linear(x.float(), dequantize(packed, scales, 128))
        got = prompt4(x, packed, scales, 128)
        rows[name] = {
            "n": n,
            "k": k,
            "rel_error": ((got - want).abs().max() / want.abs().max()).item(),
            "prompt4_ms": do_bench(lambda: prompt4(x, packed, scales, 128)),
            "dequantize_fp32_linear_ms": do_bench(
                lambda: torch.nn.functional.linear(x.float(), dequantize(packed, scales, 128))
            ),
        }
        if args.sweep:
            rows[name]["sweep"] = sweep(x, packed, scales, want)
        print(name, rows[name], flush=True)
    per_layer = {key: sum(r[key] for r in rows.values()) for key in ("prompt4_ms", "dequantize_fp32_linear_ms")}
    result = {
        "gpu": torch.cuda.get_device_name(),
        "tokens": args.tokens,
        "shapes": rows,
        "28_layers_ms": {key: 28 * v for key, v in per_layer.items()},
    }
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result["28_layers_ms"]))


if __name__ == "__main__":
    main()
