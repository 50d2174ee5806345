"""The engine's Triton matrix-vector kernel, run through Triton's interpreter on the CPU: it computes
F.linear (whole tiles, masked tiles wider than K, bias), and a fused decoder whose layers use it
gives the same logits as on F.linear. Its speed is measured on a GPU (bench/gemv_triton.py)."""
import importlib.util
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

# The interpreter is chosen when the kernel is defined, so the checks run in a fresh interpreter.
CHECKS = r"""
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from ferrylm.serve.fused import FusedDecoder
from ferrylm.serve.gemv import GemvLinear, gemv, gemv_weights

torch.manual_seed(0)
w, x, b = torch.randn(12, 100), torch.randn(100), torch.randn(12)
for block_n, block_k in ((1, 32), (2, 64), (4, 128), (2, 256)):      # 100 is no multiple: masked tiles
    got = gemv(x, w, b, block_n, block_k, num_warps=4, num_stages=1)
    assert torch.allclose(got, w @ x + b, atol=1e-4), (block_n, block_k)
got = gemv(x[:96], w[:, :96].contiguous(), None, 4, 32, num_warps=4, num_stages=1)   # whole tiles, no bias
assert torch.allclose(got, w[:, :96] @ x[:96], atol=1e-4)
for bad, message in (((x, w, None, 8, 32), "not a multiple of block_n=8"), ((x[:50], w, None, 1, 32), "input of 50"),
                     ((x, w, None, 3, 32), "powers of two")):
    try:
        gemv(*bad, num_warps=4, num_stages=1)
        raise AssertionError("no error")
    except ValueError as e:
        assert message in str(e), e

config = Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
model = Qwen2ForCausalLM(config).eval()
ids = torch.tensor([[5, 17, 30, 40, 12]])
with torch.no_grad():
    want = model(torch.cat([ids, torch.tensor([[77]])], 1)).logits[0, -1]
    dec = FusedDecoder(model, 16)
    shapes = {(128, 64), (64, 64), (192, 64), (64, 96), (256, 64)}     # wqkv (with bias), wo, w13, w2, lm_head
    used = gemv_weights(dec, pdl=False, configs={s: {"block_n": 2, "block_k": 64, "num_warps": 4, "num_stages": 1}
                                                 for s in shapes})
    assert set(used) == shapes and isinstance(dec.lm_head, GemvLinear) and isinstance(dec.layers[1].w2, GemvLinear)
    dec(ids, torch.arange(5))                                        # the prompt: F.linear
    got = dec(torch.tensor([[77]]), torch.tensor([5]))[0, -1]        # one token: the kernel
torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
print("ok")
"""


def test_gemv_kernel_in_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", CHECKS], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_engine_refuses_the_kernel_without_a_gpu(tiny_qwen2_dir):
    from transformers import AutoModelForCausalLM

    from ferrylm.serve.engine import Engine

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32)
    with pytest.raises(ValueError, match="runs on CUDA GPUs only"):
        Engine(model, max_len=16, compile=False, tune=False, gemv=True)
