"""The L2 prefetch's arguments, plan and compiled code (`ferrylm/engine/prefetch.py`). It moves no numbers,
so the GPU check is that the decode's tokens are the same with it on and off (bench/l2_prefetch.py);
here: what each program asks for, which layer asks for what, and that the sm_90 code asks from one
thread, compiled without a GPU."""
import pytest
import torch

pytest.importorskip("triton")

from ferrylm.engine import prefetch  # noqa: E402


def test_args_split_the_target_among_programs():
    t = torch.zeros(8 * 1024 * 1024 // 4, dtype=torch.int32)   # 8 MiB: 2,048 chunks
    assert prefetch.args(t, 224)[1:] == (8 * 1024 * 1024, 16)      # 2048 / 224 = 9.1 -> 16 (a power of two)
    assert prefetch.args(t, 2048)[1:] == (8 * 1024 * 1024, 1)
    assert prefetch.args(None, 10) == (None, 0, 0)


@pytest.mark.parametrize("bad", [torch.zeros(100, dtype=torch.int32),             # under one chunk
                                 torch.zeros(4096 + 3, dtype=torch.int8),         # not a multiple of 16 bytes
                                 torch.zeros(2, 4096, dtype=torch.int32).t()])    # not contiguous
def test_args_refuse_what_the_bulk_prefetch_cannot_take(bad):
    assert prefetch.args(bad, 4) == (None, 0, 0)


def test_plan_asks_nothing_off_hopper():
    """On CPU (and in the interpreter) the plan leaves every layer asking for nothing."""
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wqkv, self.wo, self.w2 = (torch.nn.Linear(4, 4) for _ in range(3))

    dec = torch.nn.Module()
    dec.layers = torch.nn.ModuleList(Layer() for _ in range(2))
    dec.embed = torch.zeros(4, 4)
    prefetch.plan(dec)
    assert all(layer.attention_prefetch is None and layer.w2.prefetch is None for layer in dec.layers)


def _ptx(fn, sig: dict, const: dict, warps: int = 4) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {**sig, **{name: "constexpr" for name in const}}
    src = ASTSource(fn=fn, signature=sig, constexprs={(list(sig).index(k),): v for k, v in const.items()},
                    attrs={(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t.startswith("*")})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}).asm["ptx"]


@pytest.mark.parametrize("chunks", [0, 4])
def test_the_compiled_4bit_kernel_asks_from_its_first_thread(chunks):
    from ferrylm.engine.gemv4_kernel import _gemv4_kernel

    sig = {name: "*bf16" for name in ("x_ptr", "w_ptr", "s_ptr", "g_ptr", "b_ptr", "r_ptr", "y_ptr")}
    sig.update(w_ptr="*i32", pos_ptr="*i64", freq_ptr="*fp32", eps="fp32", rope_scale="fp32", pf_ptr="*i32",
               pf_bytes="i64")
    const = dict(K=3584, GROUP=128, HAS_G=False, HAS_BIAS=False, NORM=False, PAIR=0, PERIOD=0, ROPE_ROWS=0,
                 RESIDUAL=True, BLOCK_N=8, BLOCK_K=512, PDL=True, SUB=1, B=8, PF_N=chunks)
    ptx = _ptx(_gemv4_kernel, sig, const)
    assert ptx.count("cp.async.bulk.prefetch.L2.global") == chunks
    if chunks:
        assert "setp.eq.u32 first, t, 0" in ptx and "@first cp.async.bulk.prefetch" in ptx


def test_the_compiled_attention_kernel_asks_before_its_early_return():
    from ferrylm.engine.decode_step import _attend_chunk

    sig = {"qkv_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "pos_ptr": "*i64", "acc_ptr": "*fp32",
           "m_ptr": "*fp32", "l_ptr": "*fp32", "layer_offset": "i32", "scale": "fp32", "pf_ptr": "*i32",
           "pf_bytes": "i64"}
    const = dict(H=28, KV=4, D=128, MAX_LEN=640, GROUP=7, BLOCK_G=16, BLOCK_L=64, PDL=True, PF_N=2)
    ptx = _ptx(_attend_chunk, sig, const)
    first_prefetch = ptx.index("cp.async.bulk.prefetch.L2.global")
    assert ptx.count("cp.async.bulk.prefetch.L2.global") == 2
    assert first_prefetch < ptx.index("ld.global")   # before the cache position is read, so before returning
