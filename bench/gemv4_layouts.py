"""The two layouts of the 4-bit kernel on one GPU, same inputs: row-major words (gemv4_words.py, the
kernel of git 36a4b51, copied in by the command below) and input-major words (gemv4.py of this commit),
each at its best configurations of earlier runs, beside torch's int4 kernel.

    git show 36a4b51:ferrylm/engine/gemv4.py > ferrylm/engine/gemv4_words.py
    python3 bench/gemv4_layouts.py gemv4_words_vs_input_major_h200.json
"""
import json, sys
import torch
from triton.testing import do_bench
sys.path.insert(0, ".")
from ferrylm.engine.gemv import ROPE, SILU, Epilogue
from ferrylm.engine import gemv4 as new, gemv4_words as old
from ferrylm.engine.int4 import Int4WeightLinear, round_to_nearest_int4

G = 128
shapes = {"wqkv": (4608, 3584, Epilogue(1e-6, ROPE, 128, 4096)), "wo": (3584, 3584, Epilogue(residual=True)),
          "w13": (37888, 3584, Epilogue(1e-6, SILU, 37888)), "w2": (3584, 18944, Epilogue(residual=True))}
OLD = {"wqkv": [(4, 1024, 4, True), (4, 512, 4, False), (8, 1024, 4, True)], "wo": [(8, 512, 8, False), (4, 512, 4, False), (8, 1024, 8, True)],
       "w13": [(16, 1024, 4, True), (8, 1024, 4, True), (16, 512, 4, False)], "w2": [(4, 1024, 8, False), (8, 1024, 8, False), (4, 2048, 8, False)]}
torch.manual_seed(0)
out = {"gpu": torch.cuda.get_device_name(), "shapes": {}}
for name, (n, k, e) in shapes.items():
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
    q, s = round_to_nearest_int4(w, G)
    x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
    g = torch.rand(k, device="cuda", dtype=torch.bfloat16) + 0.5 if e.norm_eps is not None else None
    extra = {"residual": torch.randn(n, device="cuda", dtype=torch.bfloat16)} if e.residual else {}
    if e.pair == ROPE:
        extra.update(pos=torch.tensor([100], device="cuda"), inv_freq=torch.rand(64, device="cuda"))
    lin = Int4WeightLinear(q, s, None, G)
    row = {"torch_int4_us": do_bench(lambda: lin(x.view(1, -1)), warmup=5, rep=50) * 1e3, "old": {}, "new": {}}
    po = old.pack_int4(q)
    want = old.gemv4_reference(x, po, s, G, None, e, g, **extra)
    for bn, bk, nw, wide in OLD[name]:
        f = lambda: old.gemv4(x, po, s, G, None, bn, bk, nw, 1, epilogue=e, norm_weight=g, wide=wide, **extra)
        err = ((f().float() - want).abs().max() / want.abs().max()).item()
        row["old"][f"{bn}/{bk}/{nw}/{wide}"] = (do_bench(f, warmup=5, rep=50) * 1e3, err)
    pn, sn = new.pack_int4(q, s)
    for c in new.tune4_candidates(n, k, G, e):
        f = lambda: new.gemv4(x, pn, sn, G, None, epilogue=e, norm_weight=g, **extra, **c)
        err = ((f().float() - want).abs().max() / want.abs().max()).item()
        row["new"][f"{c['block_n']}/{c['block_k']}/{c['num_warps']}"] = (do_bench(f, warmup=5, rep=50) * 1e3, err)
    best = {kind: min(v[0] for v in row[kind].values()) for kind in ("old", "new")}
    row["best_us"] = best
    print(name, f"torch {row['torch_int4_us']:.1f}", {kk: round(v, 1) for kk, v in best.items()}, flush=True)
    out["shapes"][name] = row
out["per_token_ms_28_layers"] = {kind: 28 * sum((r["torch_int4_us"] if kind == "torch_int4" else r["best_us"][kind]) for r in out["shapes"].values()) / 1e3
                                 for kind in ("torch_int4", "old", "new")}
print(out["per_token_ms_28_layers"])
json.dump(out, open(sys.argv[1], "w"), indent=1)
