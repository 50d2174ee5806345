"""The 4-bit kernel's compiled loop for sm_90 (H100/H200), made without a GPU: instructions a weight and
the most frequent opcodes, for one configuration. How the kernel's changes were read before they were
timed (studies/decode_kernels/NOTES.md, "Subnormal weights").

    .venv/bin/python studies/decode_kernels/gemv4_sass.py 8 512 4 1 2                       # block_n block_k num_warps pair sub (gate/up)
    .venv/bin/python studies/decode_kernels/gemv4_sass.py 8 1024 8 0 2 --n 3584 --k 18944   # down

The loop is the code between the kernel's last backward branch and its target; it holds two tiles (the
kernel's loop pass; `--tiles 1` for kernels before 2026-11-26's third version, one tile a pass). Triton's
own cuobjdump disassembles the cubin.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path


def compile_sm90(block_n, block_k, warps, pair, sub, n, k, group=128, ahead=1):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from ferrylm.engine.kernels import gemv4_kernel

    sig = {
        "x_ptr": "*bf16",
        "w_ptr": "*i32",
        "s_ptr": "*bf16",
        "g_ptr": "*bf16",
        "b_ptr": "*bf16",
        "r_ptr": "*bf16",
        "y_ptr": "*bf16",
        "pos_ptr": "*i64",
        "freq_ptr": "*fp32",
        "eps": "fp32",
        "rope_scale": "fp32",
    }
    const = dict(
        K=k,
        GROUP=group,
        HAS_G=bool(pair),
        HAS_BIAS=False,
        NORM=bool(pair),
        PAIR=pair,
        PERIOD=n if pair else 0,
        ROPE_ROWS=0,
        RESIDUAL=not pair,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        PDL=False,
        SUB=sub,
        B=8,
        AHEAD=ahead,
    )
    sig.update({name: "constexpr" for name in const})
    src = ASTSource(
        fn=gemv4_kernel.kernel,
        signature=sig,
        constexprs={(list(sig).index(name),): v for name, v in const.items()},
        attrs={(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t.startswith("*")},
    )
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 1})


def main() -> None:
    import argparse

    import triton

    ap = argparse.ArgumentParser()
    for name in ("block_n", "block_k", "num_warps", "pair", "sub"):
        ap.add_argument(name, type=int)
    ap.add_argument("--n", type=int, default=37888)
    ap.add_argument("--k", type=int, default=3584)
    ap.add_argument("--sass", help="write the whole disassembly here")
    ap.add_argument("--tiles", type=int, default=2, help="tiles a loop pass")
    ap.add_argument("--ahead", type=int, default=1, help="tiles of words read ahead (gemv4's ahead)")
    a = ap.parse_args()
    kernel = compile_sm90(a.block_n, a.block_k, a.num_warps, a.pair, a.sub, a.n, a.k, ahead=a.ahead)
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        sass = subprocess.run([str(tools / "cuobjdump"), "-sass", f.name], capture_output=True, text=True).stdout
        usage = subprocess.run([str(tools / "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True).stdout
    if a.sass:
        Path(a.sass).write_text(sass)
    lines = [(int(m.group(1), 16), m.group(2).strip()) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", sass)]
    back = [
        (int(b.group(1), 16), at)
        for at, op in lines
        if (b := re.search(r"BRA\s+0x([0-9a-f]+)", op)) and int(b.group(1), 16) < at and op.startswith("@")
    ]
    start, end = back[-1]
    body = [re.sub(r"^@!?U?P\w+\s+", "", op).split()[0] for at, op in lines if start <= at <= end]
    weights = a.tiles * (2 if a.pair else 1) * a.block_n * a.block_k * a.sub / (32 * a.num_warps)  # a thread's
    registers = re.search(r"REG:(\d+)", usage).group(1)
    print(
        f"triton {triton.__version__}, registers {registers}, loop {len(body)} instructions, "
        f"{len(body) / weights:.2f} a weight; {Counter(body).most_common(12)}"
    )


if __name__ == "__main__":
    main()
