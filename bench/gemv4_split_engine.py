"""The 4-bit engine built twice on one GPU (Qwen2.5-7B shapes, random weights, W4A16 group 128): with
the tuner's table as it is, and with split candidates added (programs a row block over parts of K,
`gemv4(split=...)`), so the engine's own search in the captured step may choose them.

    python3 bench/gemv4_split_engine.py --out gemv4_split_engine.json

Per engine: its build time, its chosen configurations and step (ms), then 512 tokens after a 128-token
prompt, the two engines alternated (3 runs each, twice), and whether their greedy tokens are equal.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The fastest split configurations of down in the captured step (bench/results/gemv4_in_step_split_h100.json):
# (block_n, block_k, sub, num_warps, split).
SPLITS = ((8, 256, 2, 4, 4), (8, 512, 1, 4, 4), (8, 1024, 1, 4, 2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--new-tokens", type=int, default=512)
    args = ap.parse_args()
    from gpu_decode import model_7b

    from ferrylm.engine import Engine, tuning

    model = model_7b()
    n = args.new_tokens
    engines, result = {}, {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "splits": SPLITS}
    default = tuning.TUNE4
    for name, table in (("table", default), ("table+splits", default + SPLITS)):
        tuning.TUNE4 = table
        start = time.perf_counter()
        engines[name] = engine = Engine(model, max_len=128 + n + 8, gemv=True, tune=False, int4_group=128)
        result[f"build_s_{name}"] = time.perf_counter() - start
        result[f"configs_{name}"] = {str(k[1:3]): {c: v for c, v in cfg.items() if c != "runners_up"}
                                     for k, cfg in engine.gemv_configs.items()}
        result[f"refine_timings_{name}"] = len(engine.refine_log)
    tuning.TUNE4 = default
    ids = torch.randint(100, 150000, (128,), generator=torch.Generator().manual_seed(1)).tolist()
    decode, tokens = {name: [] for name in engines}, {}
    for _ in range(2):
        for name, engine in engines.items():
            for _ in range(2):
                tokens[name] = engine.generate_timed(ids, n)["tokens"]
            decode[name] += [engine.generate_timed(ids, n)["total_s"] for _ in range(3)]
    result["decode_s"] = decode
    result["decode_median_s"] = {k: statistics.median(v) for k, v in decode.items()}
    a, b = tokens.values()
    result["tokens_equal"] = a == b
    result["first_difference"] = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if not k.startswith("configs")}, indent=2))


if __name__ == "__main__":
    main()
