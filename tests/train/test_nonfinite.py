"""Non-finite training steps: the cause found on the GPU (SDPA's cuDNN backward at widths 64 mod 128) kept out of
training, the rows of a step that still fails named, the advice following from what the step shows, and every
row shape a corpus produces training with a finite loss and finite gradients."""

import json
import logging
import re

import pytest
import torch

from ferrylm.data.encode import ArrowRows
from ferrylm.manifest import write_json_atomic
from ferrylm.prompts import IGNORE_INDEX
from ferrylm.train import run_train
from ferrylm.train.observe import advice, training_sdpa
from tests.conftest import tiny_config


def _rewrite_train_rows(run, rows):
    """train.arrow replaced by `rows`, published as the data stage publishes (the record after the rows)."""
    w = ArrowRows(run / "data" / "train.arrow", ["input_ids", "labels"])
    for r in rows:
        w.write(r)
    w.close()
    record = json.loads((run / "data" / "record.json").read_text())
    record["outputs"].pop("train_rows", None)  # these rows are the test's own: named by index alone
    write_json_atomic(run / "data" / "record.json", record)


def _sdpa_calls(monkeypatch):
    """Every SDPA call's key length, whether it had a mask, and whether the cuDNN kernels were allowed."""
    calls, real = [], torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, *args, **kwargs):
        calls.append((k.shape[-2], attn_mask is not None, torch.backends.cuda.cudnn_sdp_enabled()))
        return real(q, k, v, attn_mask, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    return calls


@pytest.mark.parametrize("cudnn", [False, True])
def test_training_steps_at_the_offending_width_run_sdpa_without_cudnn(
    copy_run, tiny_qwen2_dir, tiny_corpus, monkeypatch, cudnn
):
    # The shape of steps 32, 34, 35 and 53 of the second corpus at data.seed=2718 (docs/train.md): a padded
    # micro-batch 64 mod 128 tokens wide (960, 704, 960, 576 there; 192 here), SDPA with an explicit mask.
    run = copy_run()
    g = torch.Generator().manual_seed(0)
    rows = []
    for n in (192, 100, 192, 57):
        ids = torch.randint(20, 1000, (n,), generator=g).tolist()
        rows.append({"input_ids": ids, "labels": [IGNORE_INDEX] * (n // 2) + ids[n // 2 :]})
    _rewrite_train_rows(run, rows)
    calls = _sdpa_calls(monkeypatch)
    cfg = tiny_config(
        run,
        tiny_qwen2_dir,
        tiny_corpus,
        "train.max_steps=2",
        "train.save_steps=100",
        "train.gradient_accumulation_steps=1",
        "train.flatten_batches=false",  # padded rows with a mask, as on a GPU
        "train.gradient_checkpointing=true",  # the backward's recompute runs attention again
        "train.attention=sdpa",
        "train.eval_batches=1",
        f"train.sdpa_cudnn={str(cudnn).lower()}",
    )
    rec = run_train(cfg)
    offending = [c for c in calls if c[0] == 192 and c[1]]
    assert rec.metrics["steps"] == 2 and len(offending) >= 4  # 2 layers, forward and recompute
    assert {c[2] for c in offending} == {cudnn}
    assert torch.backends.cuda.cudnn_sdp_enabled()  # the process-wide setting is left as it was


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the cuDNN kernels run on CUDA GPUs only")
def test_on_a_gpu_the_cudnn_backward_fault_is_kept_out_of_training():
    """The fault itself (q, k, v shaped so every row's log-sum-exp is about -120, as Qwen2.5's massive-activation
    head gives), through the training steps' SDPA: finite gradients; with cuDNN allowed, NaN where this cuDNN has it."""
    import math

    import torch.nn.functional as F

    def grad_q(cudnn: bool, width: int) -> torch.Tensor:
        torch.manual_seed(0)
        q = torch.randn(1, 2, width, 128, device="cuda", dtype=torch.bfloat16) * 0.1
        k = torch.randn(1, 2, width, 128, device="cuda", dtype=torch.bfloat16) * 0.1
        v = torch.randn(1, 2, width, 128, device="cuda", dtype=torch.bfloat16)
        q[..., 0], k[..., 0] = 1.0, -120 * math.sqrt(128)
        q.requires_grad_()
        mask = torch.ones(width, width, dtype=torch.bool, device="cuda").tril()[None, None]
        with training_sdpa(cudnn):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask).backward(
                torch.ones(1, 2, width, 128, device="cuda")
            )
        return q.grad

    for width in (576, 704, 960):
        assert torch.isfinite(grad_q(False, width)).all(), width
    if torch.isfinite(grad_q(True, 704)).all():
        pytest.skip(f"this cuDNN ({torch.backends.cudnn.version()}) has no such fault")


def test_a_skipped_step_names_its_rows_in_the_log_and_the_record(
    copy_run, tiny_qwen2_dir, tiny_corpus, monkeypatch, caplog
):
    from ferrylm.train import recipe
    from tests.train.test_observe import _nan_gradient_at

    monkeypatch.setattr(recipe, "guarded_trainer_class", lambda: _nan_gradient_at({2}))
    run = copy_run()
    cfg = tiny_config(run, tiny_qwen2_dir, tiny_corpus, "train.max_steps=3", "train.save_steps=100")
    with caplog.at_level(logging.WARNING, logger="ferrylm.train"):
        rec = run_train(cfg)
    named = rec.metrics["skipped_step_rows"]["2"]
    about = [json.loads(line) for line in open(run / "data" / "train_rows.jsonl")]
    rows = [int(r) for r in re.findall(r"row (\d+) \(", named)]
    assert len(rows) == cfg.train.per_device_batch_size * cfg.train.gradient_accumulation_steps
    for r in rows:  # each row as the data stage described it: repository, function, task, tokens
        ex = about[r]["examples"][0]
        assert (
            f"{ex['repository']}: {ex['function']}, {ex['task']}, {ex['language']}; {about[r]['tokens']:,} tokens"
            in named
        )
    assert "tokens wide" in named and named in caplog.text


def test_the_advice_follows_from_what_the_step_shows():
    steady = [{"grad_norm": g} for g in (0.9, 0.7, 0.6, 0.65, 0.6)]
    climbing = [{"grad_norm": g} for g in (0.9, 0.7, 0.6, 4.0, 9.0)]
    assert "train.sdpa_cudnn=false" in advice([960, 693], steady, cudnn=True, cuda=True)
    assert "learning_rate" not in advice([960, 693], steady, cudnn=True, cuda=True)
    for shown in (
        advice([900, 693], steady, True, True),
        advice([960], steady, False, True),
        advice([960], steady, True, False),
    ):
        assert "learning_rate" not in shown and "rows" in shown and "sdpa_cudnn" not in shown
    assert "lower train.learning_rate" in advice([900], climbing, cudnn=False, cuda=True)


def _shapes(tokenizer, max_len: int) -> dict[str, dict]:
    """Row shapes a real corpus gives the collator, each as (input_ids, labels)."""
    from ferrylm.prompts import render_messages

    g = torch.Generator().manual_seed(1)

    def tokens(n):
        return torch.randint(20, 1000, (n,), generator=g).tolist()

    def question(answer: str, prompt_tokens: int = 0) -> dict:
        ex = render_messages(
            tokenizer,
            [{"role": "user", "content": "Write f. " + "x " * prompt_tokens}, {"role": "assistant", "content": answer}],
        )
        return {"input_ids": list(ex["input_ids"]), "labels": list(ex["labels"])}

    cut = question("def f():\n    return 1\n")
    long_file = question("def f():\n    return 1\n", prompt_tokens=max_len)
    at_len = {k: v[:max_len] for k, v in long_file.items()}
    return {
        "empty answer": question(""),
        "answer cut to nothing": {"input_ids": cut["input_ids"], "labels": [IGNORE_INDEX] * len(cut["labels"])},
        "exactly the model's length": {"input_ids": tokens(max_len), "labels": tokens(max_len)},
        "past the model's length": {"input_ids": tokens(max_len + 40), "labels": tokens(max_len + 40)},
        "a pad-only tail": {"input_ids": tokens(3), "labels": [IGNORE_INDEX, *tokens(2)]},
        "a file question past the context": {
            "input_ids": at_len["input_ids"],
            "labels": [IGNORE_INDEX] * (max_len - 8) + at_len["input_ids"][-8:],
        },
        "a width 64 mod 128": {"input_ids": tokens(192), "labels": tokens(192)},
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_row_shape_a_corpus_produces_trains_with_finite_loss_and_gradients(tiny_qwen2_dir, dtype):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from ferrylm.models import load_tokenizer
    from ferrylm.train.dataset import PadCollator
    from ferrylm.train.drift import kl_from_base

    tok = load_tokenizer(tiny_qwen2_dir)
    # the model's length made 256 (its rotary tables are computed, not learned): the rows at and past it stay small
    base = AutoModelForCausalLM.from_pretrained(
        tiny_qwen2_dir, dtype=dtype, attn_implementation="sdpa", max_position_embeddings=256
    )
    max_len = base.config.max_position_embeddings
    torch.manual_seed(0)
    model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    normal = _shapes(tok, max_len)["empty answer"] | {}
    normal = {"input_ids": normal["input_ids"] + [21, 22, 23], "labels": normal["labels"] + [21, 22, 23]}
    for name, row in _shapes(tok, max_len).items():
        for batch in ([row, normal], [row]) if name != "answer cut to nothing" else ([row, normal],):
            inputs = PadCollator(tok.pad_token_id, only_scored=False)(batch)
            model.zero_grad()
            with training_sdpa(False):
                out = model(**inputs, use_cache=False)
                kl, _ = kl_from_base(model, model, inputs, out.logits)
                (out.loss + kl).backward()
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            assert torch.isfinite(out.loss) and torch.isfinite(kl), (name, len(batch))
            assert grads and all(torch.isfinite(g).all() for g in grads), (name, len(batch))


def test_a_row_with_nothing_to_learn_never_reaches_the_trainer(tmp_path):
    """An answer cut to nothing alone in a micro-batch is 0 / 0: the data stage writes no such row, and counts it."""
    from ferrylm.data.stage import _Writer

    w = _Writer(tmp_path / "train.arrow", None)
    w.add([5, 6, 7], [IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX], {"repository": "r"})
    w.add([5, 6, 7], [6, IGNORE_INDEX, IGNORE_INDEX])  # its one label is the first token's, which nothing predicts
    w.add([5, 6, 7], [IGNORE_INDEX, 6, 7], {"repository": "r", "function": "f.py::g", "task": "generate"})
    w.close()
    assert (w.examples, w.without_targets, w.targets) == (1, 2, 2)
    lines = [json.loads(line) for line in open(tmp_path / "train_rows.jsonl")]
    assert lines == [{"tokens": 3, "examples": [{"repository": "r", "function": "f.py::g", "task": "generate"}]}]
