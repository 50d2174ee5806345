"""The penalty for drifting from the base (train.drift_penalty): zero where the adapters change nothing,
positive once they do, the same over padded rows and over one row's scored positions, added to the
training loss only."""

import json

import pytest
import torch
from peft import LoraConfig, get_peft_model

from ferrylm.config import load_config
from ferrylm.models import load_model
from ferrylm.prompts import IGNORE_INDEX
from ferrylm.train import run_train
from ferrylm.train.build import LIGER_LAYERS_ONLY, liger_config
from ferrylm.train.dataset import scored_positions
from ferrylm.train.drift import kl_from_base
from tests.conftest import tiny_config

IDS = [[5, 9, 14, 3, 7, 21], [8, 2, 30, 11, 0, 0]]
LABELS = [[IGNORE_INDEX, IGNORE_INDEX, 14, 3, 7, 21], [IGNORE_INDEX, 2, 30, 11, IGNORE_INDEX, IGNORE_INDEX]]


def _kl(model, inputs):
    with torch.no_grad():
        logits = model(**{k: v for k, v in inputs.items() if k not in ("labels", "shift_labels")}).logits
    return kl_from_base(model, model, inputs, logits)


def _lora(tiny_qwen2_dir):
    model = load_model(tiny_qwen2_dir).eval()
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))


def test_no_drift_until_the_adapters_change_and_both_batch_forms_agree(tiny_qwen2_dir):
    model = _lora(tiny_qwen2_dir)
    ids, labels = torch.tensor(IDS), torch.tensor(LABELS)
    padded = {"input_ids": ids, "labels": labels, "attention_mask": (torch.arange(6) < torch.tensor([[6], [4]])).long()}
    total, n = _kl(model, padded)
    assert n == 7 and abs(float(total)) < 1e-5  # LoRA's B starts at zero: the fine-tune is the base
    torch.manual_seed(0)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            p.data.normal_(0, 0.5)
    total, n = _kl(model, padded)
    assert n == 7 and float(total) > 1e-3
    # the first row alone, padded or as the trainer's scored positions: the same sum
    one = {"input_ids": ids[:1], "labels": labels[:1], "attention_mask": torch.ones(1, 6, dtype=torch.long)}
    scored = one | scored_positions(labels[:1])
    a, b = _kl(model, one), _kl(model, scored)
    assert a[1] == b[1] == 4 and torch.allclose(a[0], b[0], rtol=1e-4)


def test_a_full_fine_tune_is_refused_one_line():
    with pytest.raises(ValueError, match="train.drift_penalty.*lora"):
        load_config("default", ["train.drift_penalty=0.5", "train.method=full"])
    with pytest.raises(ValueError, match="^train.liger: with the drift penalty Liger keeps to the decoder's layers"):
        load_config("default", ["train.drift_penalty=0.5", "train.liger=true", "train.compile=layers"])


def test_liger_leaves_the_output_layer_to_the_drift_penalty():
    """Liger's fused linear cross-entropy never gives the logits the penalty reads: under the penalty Liger
    replaces the layers' RMSNorm, SwiGLU and RoPE, and the output layer stays ours (fused where asked)."""
    drift = load_config("default", ["train.drift_penalty=0.5", "train.liger=true", "train.fused_head=true"]).train
    assert liger_config(drift) == LIGER_LAYERS_ONLY and drift.head_fused
    assert not any(LIGER_LAYERS_ONLY[k] for k in ("cross_entropy", "fused_linear_cross_entropy"))
    plain = load_config("default", ["train.liger=true", "train.fused_head=true"]).train
    assert liger_config(plain) is None and not plain.head_fused  # all of Liger's kernels, its own output layer
    compiled = load_config("default", ["train.liger=true", "train.compile=layers"]).train
    assert liger_config(compiled)["fused_linear_cross_entropy"] and not liger_config(compiled)["rms_norm"]
    assert liger_config(load_config("default", []).train) is None


def test_the_old_name_is_refused_with_its_new_one():
    with pytest.raises(ValueError, match=r"^train.kl_to_base: renamed train.drift_penalty \(docs/CHANGELOG.md\)$"):
        load_config("default", ["train.kl_to_base=0.5"])


@pytest.mark.integration
def test_a_run_logs_its_drift_from_the_base(copy_run, tiny_qwen2_dir, tiny_corpus):
    run = copy_run()
    run_train(tiny_config(run, tiny_qwen2_dir, tiny_corpus, "train.max_steps=3", "train.drift_penalty=1.0"))
    history = [json.loads(ln) for ln in open(run / "train" / "log_history.jsonl")]
    drift = [h["kl_to_base"] for h in history if "kl_to_base" in h]  # the KL measured, not the weight
    assert len(drift) == 3 and drift[0] < 1e-6 < drift[-1]  # the base itself at the first step, then apart
