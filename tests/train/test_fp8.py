"""LoRA on an FP8 base (ferrylm/train/fp8.py, train.base_precision=fp8): the layer's products and its
input gradient track the linear layer within e4m3's rounding, the base gets no gradient, and the
tiny recipe trains to the same losses as on its fp32 base within a stated tolerance (on the CPU,
where torch emulates the FP8 products; the GPU's speed is in docs/performance.md)."""

import pytest
import torch

from ferrylm.train.fp8 import E4M3, Fp8BaseLinear, fp8_unsupported_reason, quantize_rows
from tests.pinning import pinned


def _rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def test_the_fp8_layer_tracks_the_linear_and_passes_only_the_input_gradient():
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 96).requires_grad_(False)
    layer = Fp8BaseLinear(linear)
    assert layer.weight.dtype == E4M3 and not layer.weight.requires_grad and layer.bias is linear.bias
    assert torch.equal(layer.w_t_q.float(), layer.weight.float().t())
    x = torch.randn(3, 7, 64, requires_grad=True)
    xr = x.detach().clone().requires_grad_(True)
    y, want = layer(x), linear(xr)
    g = torch.randn_like(want)
    y.backward(g)
    want.backward(g)
    # e4m3 keeps 3 mantissa bits: each operand is off by up to 1/16 of itself, about 2-3 % of a product.
    assert 0.005 < _rel(y, want) < 0.05
    assert 0.005 < _rel(x.grad, xr.grad) < 0.05
    assert _rel(
        linear.weight.bfloat16().float() @ x.detach().reshape(-1, 64).t(),
        linear.weight @ x.detach().reshape(-1, 64).t(),
    ) < _rel(y, want)  # bf16 alone is closer
    q, scale = quantize_rows(torch.tensor([[1.0, -448.0, 0.0], [0.0, 0.0, 0.0]]))
    assert q.dtype == E4M3 and scale[:, 0].tolist() == pytest.approx([1.0, 1e-12 / 448])


def test_gpus_without_fp8_are_named(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    reason = fp8_unsupported_reason(torch.device("cuda", 0))
    assert reason.startswith("NVIDIA A100-SXM4-80GB has no FP8 matrix products (compute capability 8.9")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert fp8_unsupported_reason(torch.device("cuda", 0)) is None
    assert fp8_unsupported_reason(torch.device("cpu")) is None


def test_lora_on_an_fp8_base_trains_as_on_the_full_precision_base(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    from ferrylm.train import run_train

    from .test_train import LORA_CURVE, _history

    run = copy_run()
    rec = run_train(make_config(run, tiny_qwen2_dir, tiny_corpus, "train.base_precision=fp8"))
    assert rec.metrics["steps"] == 8 and rec.metrics["eval_loss"] < rec.metrics["base_eval_loss"] - 0.05
    got = _history(run)
    # This curve pinned as test_train's is, then held to the same recipe on its fp32 base: every step
    # within 0.005 (measured: at most 0.0025).
    want = {1: 10.7944, 2: 10.8051, 3: 10.7478, 4: 10.7690, 5: 10.7304, 6: 10.7474, 7: 10.7213, 8: 10.6618}
    pinned("fp8 curve", "fp8-curve", got, want)
    pinned("fp8 eval loss", "train-loss", rec.metrics["eval_loss"], 10.7293)
    assert max(abs(got[k] - v) for k, v in LORA_CURVE.items()) < 0.005
