"""train.fused_head: the loss and the drift penalty from the last hidden states, a chunk of answer tokens at a
time, equal to the model's own loss and kl_from_base's sum over every position's logits, with the same gradients."""

import json

import pytest
import torch
from peft import LoraConfig, get_peft_model

from ferrylm.models import load_model
from ferrylm.train import run_train
from ferrylm.train.dataset import PadCollator
from ferrylm.train.drift import head_sums, kl_from_base, last_hidden
from tests.conftest import tiny_config
from tests.train.test_drift import IDS, LABELS


def _lora(tiny_qwen2_dir):
    torch.manual_seed(0)
    base = load_model(tiny_qwen2_dir)
    base.config.use_cache = False  # as build_model trains it: with a cache, packed positions are not kept apart
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    for name, p in model.named_parameters():
        if "lora_B" in name:  # apart from the base, so the KL is not zero
            p.data.normal_(0, 0.5)
    return model.train()


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("form", ["padded", "flattened"])
def test_the_fused_head_gives_the_models_loss_and_the_kl_with_the_same_gradients(tiny_qwen2_dir, form):
    model = _lora(tiny_qwen2_dir)
    rows = [{"input_ids": i[: 6 - 2 * k], "labels": lab[: 6 - 2 * k]} for k, (i, lab) in enumerate(zip(IDS, LABELS))]
    inputs = PadCollator(0, flatten=form == "flattened", only_scored=False)(rows)

    out = model(**inputs)  # the model's own loss: the mean over answer tokens
    kl, n = kl_from_base(model, model, inputs, out.logits)
    (out.loss * n + kl).backward()
    reference = _grads(model)
    model.zero_grad()

    with torch.no_grad(), model.disable_adapter():
        base = last_hidden(model, inputs)
    ce, fused_kl, m = head_sums(
        model.get_base_model().get_output_embeddings(), last_hidden(model, inputs), base, inputs["labels"]
    )
    (ce + fused_kl).backward()
    assert m == n == 7 and float(fused_kl.detach()) > 1e-3
    assert float(ce) == pytest.approx(float(out.loss) * n, rel=1e-5)
    assert float(fused_kl) == pytest.approx(float(kl), rel=1e-3)
    fused = _grads(model)
    assert fused.keys() == reference.keys()
    for name, g in reference.items():
        # against the tensor's scale: fp32 sums in another order leave ~1e-5 on entries of 1.5, which an
        # element-wise tolerance reads as wrong where that entry's neighbour is near zero
        assert float((fused[name] - g).abs().max()) <= 1e-4 * float(g.abs().max()) + 1e-7, name


@pytest.mark.integration
def test_a_run_with_the_fused_head_logs_the_same_losses(copy_run, tiny_qwen2_dir, tiny_corpus):
    losses = {}
    for fused in ("true", "false"):
        run = copy_run(f"run-{fused}")
        cfg = tiny_config(
            run,
            tiny_qwen2_dir,
            tiny_corpus,
            "train.max_steps=3",
            "train.save_steps=100",
            "train.drift_penalty=1.0",
            "train.flatten_batches=false",  # padded rows with a mask, as on a GPU
            f"train.fused_head={fused}",
        )
        rec = run_train(cfg)
        assert rec.metrics["fused_head"] is (fused == "true")
        history = [json.loads(line) for line in open(run / "train" / "log_history.jsonl")]
        losses[fused] = [(h["loss"], h["kl_to_base"]) for h in history if "kl_to_base" in h]
    assert len(losses["true"]) == 3
    for (a, ka), (b, kb) in zip(losses["true"], losses["false"]):
        assert a == pytest.approx(b, rel=1e-4) and ka == pytest.approx(kb, rel=1e-3, abs=1e-7)
