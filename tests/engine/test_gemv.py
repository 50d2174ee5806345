"""The engine's Triton kernels, run through Triton's interpreter on the CPU: the matrix-vector kernel
computes F.linear (whole tiles, masked tiles wider than K, bias) and each of its epilogues its
reference; the attention kernel equals SDPA and writes the cache; a fused decoder on the kernel, and
the fused one-token step (decode_step.py) over several steps, give transformers' logits. Their speed
is measured on a GPU (studies/decode_kernels/gemv_vs_cublas.py)."""

import importlib.util
import os
import re
import subprocess
import sys
import tempfile

import pytest
import torch

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

# The interpreter is chosen when the kernel is defined, so the checks run in a fresh interpreter.
CHECKS = r"""
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

import torch.nn.functional as F
from ferrylm.engine.decode_step import attention, gemv_weights
from ferrylm.engine.fused import FusedDecoder
from ferrylm.engine.kernels.gemv import ROPE, SILU, Epilogue, Launch, gemv, gemv_reference
from ferrylm.engine.kernels.linear import GemvLinear

print("CHECK plain products, masked and whole tiles", flush=True)
torch.manual_seed(0)
w, x, b = torch.randn(12, 100), torch.randn(100), torch.randn(12)
for block_n, block_k in ((1, 32), (2, 64), (4, 128), (2, 256)):      # 100 is no multiple: masked tiles
    got = gemv(x, w, b, Launch(block_n, block_k, num_warps=4, num_stages=1))
    assert torch.allclose(got, w @ x + b, atol=1e-4), (block_n, block_k)
got = gemv(x[:96], w[:, :96].contiguous(), None, Launch(4, 32))   # whole tiles, no bias
assert torch.allclose(got, w[:, :96] @ x[:96], atol=1e-4)
print("CHECK bad block sizes are refused", flush=True)
for bad, message in (((x, w, None, Launch(8, 32)), "do not split into programs of block_n=8"),
                     ((x[:50], w, None, Launch(1, 32)), "input of 50"), ((x, w, None, Launch(3, 32)), "powers of two")):
    try:
        gemv(*bad)
        raise AssertionError("no error")
    except ValueError as e:
        assert message in str(e), e

print("CHECK each epilogue against its reference", flush=True)
# Each epilogue against its plain-torch reference, and attention against SDPA (the cache written).
w, x, b, r = torch.randn(32, 100), torch.randn(100), torch.randn(32), torch.randn(32)
pos, freq = torch.tensor([7]), torch.rand(4)
for e, extra in ((Epilogue(1e-6), {}), (Epilogue(residual=True), {"residual": r}), (Epilogue(1e-6, SILU, 32), {}),
                 (Epilogue(1e-6, ROPE, 8, 24, 1.5), {"pos": pos, "inv_freq": freq})):
    for block_n in (1, 2):
        got = gemv(x, w, b, Launch(block_n, 64), e, **extra)
        torch.testing.assert_close(got, gemv_reference(x, w, b, e, **extra), atol=1e-4, rtol=1e-4)
print("CHECK attention against SDPA, the cache written", flush=True)
L, KV, H, D, MAX = 2, 2, 4, 16, 150
k_cache, v_cache = torch.randn(L, 1, KV, MAX, D), torch.randn(L, 1, KV, MAX, D)
for p in (0, 5, 63, 64, 130):
    qkv = torch.randn((H + 2 * KV) * D)
    k_got, v_got = k_cache.clone(), v_cache.clone()
    got = attention(qkv, k_got, v_got, torch.tensor([p]), 1, H)
    # with programs reading other words into the L2 meanwhile (the o product's): the same
    k_pf, v_pf = k_cache.clone(), v_cache.clone()
    words = torch.randint(-2 ** 31, 2 ** 31 - 1, (20000,), dtype=torch.int32)
    assert torch.equal(attention(qkv, k_pf, v_pf, torch.tensor([p]), 1, H, prefetch=words, prefetch_block=4096), got)
    q, k, v = qkv.split([H * D, KV * D, KV * D])
    k_want, v_want = k_cache.clone(), v_cache.clone()
    k_want[1, 0, :, p], v_want[1, 0, :, p] = k.view(KV, D), v.view(KV, D)
    want = F.scaled_dot_product_attention(q.view(1, H, 1, D), k_want[1][:, :, :p + 1], v_want[1][:, :, :p + 1],
                                          enable_gqa=True)
    torch.testing.assert_close(got, want.reshape(-1), atol=1e-4, rtol=1e-4)
    assert torch.equal(k_got, k_want) and torch.equal(v_got, v_want), p
# PART: the decoder, in its own interpreter beside the checks above
torch.manual_seed(0)
print("CHECK every product of a decoder on the kernel", flush=True)
config = Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
model = Qwen2ForCausalLM(config).eval()
with torch.no_grad():   # norm weights away from 1, so folding them into the matrices is checked
    for norm in [n for layer in model.model.layers for n in (layer.input_layernorm, layer.post_attention_layernorm)]:
        norm.weight.uniform_(0.5, 1.5)
    model.model.norm.weight.uniform_(0.5, 1.5)
ids = [5, 17, 30, 40, 12, 77, 3, 9]
fixed = {"block_n": 2, "block_k": 64, "num_warps": 4, "num_stages": 1}
with torch.no_grad():
    want = model(torch.tensor([ids])).logits[0]
    # Every product on the kernel, no epilogues: the prompt through F.linear, one token through the kernel.
    dec = FusedDecoder(model, 16)
    used = gemv_weights(dec, pdl=False, fused_step=False, fixed=fixed)
    assert {k[:2] for k in used} == {(128, 64), (64, 64), (192, 64), (64, 96), (256, 64)}   # wqkv (bias), wo, w13, w2, lm_head
    assert isinstance(dec.lm_head, GemvLinear) and isinstance(dec.layers[1].w2, GemvLinear)
    dec(torch.tensor([ids[:5]]), torch.arange(5))
    torch.testing.assert_close(dec(torch.tensor([[ids[5]]]), torch.tensor([5]))[0, -1], want[5], atol=1e-4, rtol=1e-4)
    print("CHECK the fused one-token step over two cache chunks", flush=True)
    # The fused step: norms folded into the matrices, rotary positions, SiLU gate, residual adds and
    # attention in the kernels; three steps, the second chunk of the cache included (BLOCK_L is 64).
    dec = FusedDecoder(model, 80)
    gemv_weights(dec, pdl=False, fixed=fixed)
    assert dec.one_token_step is not None and dec.norm_weights_folded
    long_ids = (ids * 9)[:70]
    want = model(torch.tensor([long_ids])).logits[0]
    dec(torch.tensor([long_ids[:62]]), torch.arange(62))               # the prompt: F.linear on folded weights
    for i in range(62, 70):
        got = dec(torch.tensor([[long_ids[i]]]), torch.tensor([i]))[0, -1]
        torch.testing.assert_close(got, want[i], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(model(torch.tensor([long_ids])).logits[0], want)   # the model's weights untouched

print("ok")
"""


@pytest.mark.slow
def test_gemv_kernel_in_the_interpreter():
    _interpret(CHECKS, 6)


# The 4-bit kernel (gemv4.py): the same checks on packed round-to-nearest weights, against the
# dequantized weights in fp32, and the fused step of a 4-bit decoder against its own prompt path.
CHECKS4 = r"""
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from ferrylm.engine.decode_step import gemv_weights
from ferrylm.engine.fused import FusedDecoder
from ferrylm.engine.kernels.gemv import ROPE, SILU, Epilogue, Launch
from ferrylm.engine.kernels.gemv4 import dequantize, gemv4, gemv4_reference, pack_int4, prompt4
from ferrylm.engine.kernels.linear import Gemv4Linear
from ferrylm.engine.kernels.int4 import int4_weights, round_to_nearest_int4

print("CHECK packing in strips, whole and masked tiles, groups, the norm's weight", flush=True)
torch.manual_seed(0)
for n, k, group, block_k in ((12, 128, 32, 64), (12, 96, 32, 64), (8, 192, 32, 64), (8, 256, 64, 128), (8, 256, 32, 512),
                             (8, 320, 32, 64)):   # tiles: 2, 2 (the last masked), 3, 2, 1 (masked), 5
    q, s = round_to_nearest_int4(torch.randn(n, k), group)
    q[0, :8] = torch.tensor([-8, 7, 0, -1, 1, 5, -6, 3])    # every nibble position, both ends of the range
    p, st = pack_int4(q, s)
    b = 4 if n == 12 else 8    # strips of the largest power of two up to 8 that divides the rows
    assert p.dtype == torch.int32 and p.shape == (n // b, k // 8, b) and st.shape == (n // b, k // group, b)
    assert p[0, 0, 0].item() == sum((v + 8) << (4 * j) for j, v in enumerate([-8, 7, 0, -1, 1, 5, -6, 3])) - 2 ** 32
    assert p[0, 1, 1].item() & 15 == q[1, 8].item() + 8 and st[0, 1, 1] == s[1, 1]   # row 1, input 8, group 1
    assert torch.equal(dequantize(p, st, group), (q.float().view(n, -1, group) * s[..., None]).reshape(n, k))
    x, b, g = torch.randn(k), torch.randn(n), torch.rand(k) + 0.5
    for block_n, sub, ahead in ((1, 1, 1), (2, 2, 1), (4, 1, 1), (2, 2, 2)):   # sub: two row blocks a program
        got = gemv4(x, p, st, group, b, Launch(block_n, block_k), norm_weight=g, sub=sub, ahead=ahead)
        torch.testing.assert_close(got, gemv4_reference(x, p, st, group, b, norm_weight=g), atol=1e-4, rtol=1e-4)
    # The products are scaled by 2^-50 inside (subnormal weights): large and small x come back exact too.
    for size in (3e4, 1e-6):
        got = gemv4(x * size, p, st, group, None, Launch(2, block_k), norm_weight=g)
        torch.testing.assert_close(got, gemv4_reference(x * size, p, st, group, None, norm_weight=g), atol=0, rtol=1e-5)
    # bf16 x and norm weight (the engine's) are read four values a load; an unaligned view is copied first.
    xb, gb = torch.randn(k + 1).bfloat16()[1:], g.bfloat16()
    got = gemv4(xb, p, st, group, b.bfloat16(), Launch(2, block_k), norm_weight=gb)
    want = gemv4_reference(xb.float(), p, st, group, b, norm_weight=gb.float())
    torch.testing.assert_close(got, want.bfloat16(), atol=1e-5, rtol=8e-3)
print("CHECK a group that does not divide the tile is refused", flush=True)
try:
    gemv4(x, p, st, 32, None, Launch(1, 16))
    raise AssertionError("no error")
except ValueError as e:
    assert "must be a power of two dividing block_k=16" in str(e), e
print("CHECK each epilogue against its reference", flush=True)
q, s = round_to_nearest_int4(torch.randn(32, 128), 32)
(p, st), x, b, r, g = pack_int4(q, s), torch.randn(128), torch.randn(32), torch.randn(32), torch.rand(128) + 0.5
pos, freq = torch.tensor([7]), torch.rand(4)
for e, extra in ((Epilogue(1e-6), {}), (Epilogue(residual=True), {"residual": r}), (Epilogue(1e-6, SILU, 32), {}),
                 (Epilogue(1e-6, ROPE, 8, 24, 1.5), {"pos": pos, "inv_freq": freq})):
    norm = g if e.norm_eps is not None else None
    for block_n, sub, ahead in ((1, 1, 1), (2, 2, 1), (2, 1, 2)) + (((8, 2, 1),) if e.pair != ROPE else ()):
        # 8: whole strips a block; ahead 2: the words two tiles ahead
        got = gemv4(x, p, st, 32, b, Launch(block_n, 64), e, norm, sub=sub, ahead=ahead, **extra)
        torch.testing.assert_close(got, gemv4_reference(x, p, st, 32, b, e, norm, **extra), atol=1e-4, rtol=1e-4)
print("CHECK the prompt's product: integers through dot, scales after each group", flush=True)
for n, k, m, group in ((32, 128, 5, 32), (12, 64, 3, 16), (40, 256, 17, 64)):   # rows and strips past the blocks
    q, s = round_to_nearest_int4(torch.randn(n, k), group)
    p, st = pack_int4(q, s)
    x = torch.randn(m, k)   # fp32 here: the interpreter's bf16 dot is not exact
    want = torch.nn.functional.linear(x, dequantize(p, st, group))
    torch.testing.assert_close(prompt4(x, p, st, group, block_m=16, block_n=16), want, atol=1e-4, rtol=1e-5)
try:
    prompt4(x, p, st, 8)
    raise AssertionError("no error")
except ValueError as e:
    assert "power-of-two group of at least 16" in str(e), e
# PART: the decoder, in its own interpreter beside the checks above
torch.manual_seed(0)
print("CHECK a 4-bit decoder's fused step against its prompt path, over two cache chunks", flush=True)
config = Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
model = Qwen2ForCausalLM(config).eval()
with torch.no_grad():   # norm weights away from 1: the kernel multiplies x by them (not folded into integers)
    for norm in [n for layer in model.model.layers for n in (layer.input_layernorm, layer.post_attention_layernorm)]:
        norm.weight.uniform_(0.5, 1.5)
    model.model.norm.weight.uniform_(0.5, 1.5)
ids = ([5, 17, 30, 40, 12, 77, 3, 9] * 9)[:66]
with torch.no_grad():
    ref = FusedDecoder(model, 80)
    assert int4_weights(ref, 32, Gemv4Linear) == 8
    want = ref(torch.tensor([ids]), torch.arange(66))[0]      # dequantized weights, F.linear in fp32
    dec = FusedDecoder(model, 80)
    int4_weights(dec, 32, Gemv4Linear)
    used = gemv_weights(dec, pdl=False, fixed={"block_n": 2, "block_k": 64, "num_warps": 4, "num_stages": 1})
    assert sorted(k[1:4] for k in used if k[0] == "int4") == [(64, 64, 32), (64, 96, 32), (128, 64, 32), (192, 64, 32)]
    assert dec.layers[0].wqkv.norm_weight is dec.layers[0].norm_in and dec.layers[0].wo.norm_weight is None
    dec(torch.tensor([ids[:63]]), torch.arange(63))
    for i in (63, 64):   # the last position of the first chunk, the first of the second
        got = dec(torch.tensor([[ids[i]]]), torch.tensor([i]))[0, -1]
        torch.testing.assert_close(got, want[i], atol=1e-4, rtol=1e-4)
print("ok")
"""


def _parts(checks: str) -> list[str]:
    """The script's imports followed by each of its parts (split at `# PART:` lines), each a whole script."""
    head, body = checks.split('print("CHECK', 1)
    body = 'print("CHECK' + body.removesuffix('print("ok")\n')
    return [head + part + 'print("ok")\n' for part in re.split(r"^# PART:.*\n", body, flags=re.M)]


def _interpret(checks: str, count: int) -> None:
    """Each part in an interpreter of its own, all at once: the interpreter runs on one core."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    runs = []
    for part in _parts(checks):
        out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        runs.append(
            (subprocess.Popen([sys.executable, "-c", part], env=env, stdout=out, stderr=err, text=True), out, err)
        )
    started = []
    for proc, out, err in runs:
        code = proc.wait(timeout=600)
        out.seek(0), err.seek(0)
        said = out.read()
        started += [line[6:] for line in said.splitlines() if line.startswith("CHECK ")]
        if code != 0 or not said.strip().endswith("ok"):
            pytest.fail(f"check {started[-1] if started else 'setup'!r} failed:\n{err.read()[-3000:]}")
    assert len(started) == count


@pytest.mark.slow
def test_int4_gemv_kernel_in_the_interpreter():
    _interpret(CHECKS4, 5)


def test_engine_refuses_the_kernel_without_a_gpu(tiny_qwen2_dir):
    from transformers import AutoModelForCausalLM

    from ferrylm.engine import Engine

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32)
    with pytest.raises(ValueError, match="runs on CUDA GPUs only"):
        Engine(model, max_len=16, compile=False, tune=False, gemv=True)


def test_the_4bit_kernels_hooks_name_the_program_gemv4_launches():
    """The studies' hooks: `gemv4_kernel.kernel` is the program `gemv4` launches, and `kernel_swapped`
    puts another in its place for the block only."""
    from ferrylm.engine.kernels import gemv4, gemv4_kernel

    assert gemv4_kernel.kernel is gemv4._gemv4_kernel
    other = object()
    with gemv4.kernel_swapped(other):
        assert gemv4._gemv4_kernel is other
    assert gemv4._gemv4_kernel is gemv4_kernel.kernel
    with pytest.raises(KeyError), gemv4.kernel_swapped(other):
        raise KeyError("a study's step failed")
    assert gemv4._gemv4_kernel is gemv4_kernel.kernel  # restored on the way out of a failure too
