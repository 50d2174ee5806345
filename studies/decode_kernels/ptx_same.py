"""Does a change to the engine's kernels change what the GPU runs? The bf16 and 4-bit matrix-vector kernels
compiled to PTX for sm_90a (no GPU needed: Triton compiles on the CPU) over 80 configurations of the kinds
decode_step uses (each epilogue, with and without programmatic dependent launch, two tilings; the 4-bit kernel
with one and two row blocks, words read one and two tiles ahead, a folded norm weight), each configuration's
PTX hashed without its source-line records. Equal hashes before and after a change: the same instructions.

    .venv/bin/python studies/decode_kernels/ptx_same.py before.json            # on the code before the change
    .venv/bin/python studies/decode_kernels/ptx_same.py after.json --against before.json
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from ferrylm.engine.kernels.gemv import _gemv_kernel
from ferrylm.engine.kernels.gemv4_kernel import _gemv4_kernel

TARGET = GPUTarget("cuda", 90, 32)
K = 3584  # Qwen2.5-7B's hidden size
# (pair, period, rope_rows, norm, residual, bias): plain, norm + bias, residual, SiLU pair, RoPE pair
EPILOGUES = [
    (0, K, 0, False, False, False),
    (0, K, 0, True, False, True),
    (0, K, 0, False, True, False),
    (1, 18944, 0, True, False, False),
    (2, 128, 4096, True, False, True),
]
POINTERS = {"pos_ptr": "*i64", "freq_ptr": "*fp32", "eps": "fp32", "rope_scale": "fp32"}


def ptx_hash(fn, signature: dict, constexprs: dict) -> str:
    signature = signature | {name: "constexpr" for name in constexprs}
    compiled = triton.compile(
        ASTSource(fn=fn, signature=signature, constexprs=constexprs),
        target=TARGET,
        options={"num_warps": 4, "num_stages": 2},
    )
    text = compiled.asm["ptx"].split(".section\t.debug", 1)[0]  # debug sections: source lines only
    lines = [line for line in text.splitlines() if not re.match(r"\s*(\.loc|\.file|//|$)", line)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def hashes() -> dict[str, str]:
    out = {}
    for (pair, period, rope_rows, norm, res, bias), pdl, (bn, bk) in itertools.product(
        EPILOGUES, (False, True), ((2, 512), (4, 256))
    ):
        shared = dict(HAS_BIAS=bias, NORM=norm, PAIR=pair, PERIOD=period, ROPE_ROWS=rope_rows, RESIDUAL=res)
        names = ["x_ptr", "w_ptr", "b_ptr", "r_ptr", "y_ptr"]
        bf16 = {name: "*bf16" for name in names} | POINTERS
        consts = dict(K=K, **shared, BLOCK_N=bn, BLOCK_K=bk, EVEN_K=K % bk == 0, PDL=pdl)
        out[f"gemv {pair} {norm} {res} {bias} {pdl} {bn} {bk}"] = ptx_hash(_gemv_kernel, bf16, consts)
        for sub, ahead, has_g in ((1, 1, False), (2, 1, True), (2, 2, False)):
            sig4 = {name: "*bf16" for name in names + ["s_ptr", "g_ptr"]} | {"w_ptr": "*i32"} | POINTERS
            consts4 = dict(K=K, GROUP=128, HAS_G=has_g, **shared, BLOCK_N=4 * bn, BLOCK_K=bk, PDL=pdl)
            consts4 |= dict(SUB=sub, B=8, AHEAD=ahead)
            key = f"gemv4 {pair} {norm} {res} {bias} {pdl} {bn} {bk} {sub} {ahead} {has_g}"
            out[key] = ptx_hash(_gemv4_kernel, sig4, consts4)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the hashes, as JSON")
    ap.add_argument("--against", help="an earlier run's JSON: print the configurations whose PTX differs")
    args = ap.parse_args(argv)
    now = hashes()
    with open(args.out, "w") as f:
        json.dump(now, f, indent=0)
    if not args.against:
        print(f"{len(now)} configurations")
        return 0
    with open(args.against) as f:
        before = json.load(f)
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    print(f"{len(now)} configurations, {len(differ)} differ" + "".join(f"\n  {k}" for k in differ))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
