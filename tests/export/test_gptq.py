"""The calibrated W4A16 quantizer: on the artifact's 4-bit grid, and closer than round-to-nearest
where it matters — a layer's outputs on its inputs, and a real model's next-token distributions."""

import random

import pytest
import torch

from ferrylm.config.export import ExportConfig
from ferrylm.engine.kernels.int4 import round_to_nearest_int4
from ferrylm.export.gptq import gptq_weight
from ferrylm.export.parity import compare, reference_outputs
from ferrylm.export.vllm_quant import load_compressed, write_compressed
from tests.pinning import pinned


def _output_error(w, q, x):
    return ((x @ (w - q).T).norm() / (x @ w.T).norm()).item()


def test_gptq_stays_on_the_grid_and_moves_a_layers_outputs_less_than_rounding():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(64, 256, generator=g) * 0.05
    # Inputs as a real layer sees them: correlated features, a few channels with large activations.
    x = torch.randn(4096, 32, generator=g) @ torch.randn(32, 256, generator=g)
    x[:, :4] *= 20
    hessian = 2 * x.T @ x / len(x)
    q, scales = gptq_weight(w, hessian, 64, torch.bfloat16)
    assert scales.shape == (64, 4)
    ints = q / scales.repeat_interleave(64, 1)
    assert torch.allclose(ints, ints.round(), atol=1e-4) and ints.min() >= -8 and ints.max() <= 7
    rq, rs = round_to_nearest_int4(w.to(torch.bfloat16), 64)
    rtn = (rq.float().reshape(64, 4, 64) * rs.float()[..., None]).reshape(64, 256)
    gptq_err, rtn_err = _output_error(w, q, x), _output_error(w, rtn, x)
    # Measured: 0.1046 and 0.0091, 11x closer.
    pinned("rtn and gptq output errors", "quant-error", [rtn_err, gptq_err], [0.1046, 0.0091])


def test_full_range_clipping_takes_each_groups_largest_weight_and_the_search_never_does_worse():
    g = torch.Generator().manual_seed(2)
    w = torch.randn(16, 128, generator=g) * 0.05
    x = torch.randn(512, 128, generator=g)
    hessian = 2 * x.T @ x / len(x)
    _, full = gptq_weight(w, hessian, 32, torch.bfloat16, ratios=(1.0,))
    want = (w.reshape(16, 4, 32).abs().amax(-1) / 7.5).to(torch.bfloat16).float()
    assert torch.equal(full, want)
    _, searched = gptq_weight(w, hessian, 32, torch.bfloat16)
    assert (searched <= full).all() and (searched < full).any()  # a ratio under 1.0 won somewhere


def test_the_calibration_seed_draws_other_rows(tiny_data_run, tiny_qwen2_dir, tiny_corpus):
    from ferrylm.export.stage import _calibration_rows
    from tests.conftest import tiny_config

    cfg = tiny_config(tiny_data_run, tiny_qwen2_dir, tiny_corpus, "export.calibration_rows=8")
    first, again = _calibration_rows(cfg), _calibration_rows(cfg)
    other = _calibration_rows(cfg.model_copy(update={"export": cfg.export.model_copy(update={"calibration_seed": 1})}))
    assert first == again and len(first) == len(other) == 8 and first != other


@pytest.mark.slow
def test_gptq_on_smollm2_keeps_next_token_distributions_closer_than_rounding(smollm2_dir, tiny_data_run, tmp_path):
    """Real SmolLM2-135M weights, group 64, the export's parity on 4 held-out prompts x 16 tokens. GPTQ,
    calibrated on 64 of the data stage's training rows (a standard-library slice in SmolLM2's chat
    template; on a CPU in fp32), with each group's full range (the default) and with the clipping search:
    mean KL to the bf16 model 0.237 and 0.081 against round-to-nearest's 0.660 when measured, forced agreement
    (the export's gate, 0.7) 0.938 and 0.922 against 0.891, free-running 0.844 and 0.672 against 0.703. On
    these prompts rounding clears the gate too: it is a floor on quality; the KL is what separates the methods
    (here the search's too, where on the fine-tuned Qwen2.5-Coder-1.5B it did not, and lost Pass@1:
    docs/notes/quantization.md)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ferrylm.data.encode import load_rows
    from ferrylm.manifest import read_jsonl

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    held_out = read_jsonl(tiny_data_run / "data" / "eval.jsonl", 4)
    prompts = [
        tok(
            tok.apply_chat_template(r["messages"], add_generation_prompt=True, tokenize=False), add_special_tokens=False
        )["input_ids"]
        for r in held_out
    ]
    train = load_rows(tiny_data_run / "data" / "train.arrow")
    rows = [list(train[i]["input_ids"]) for i in sorted(random.Random(0).sample(range(len(train)), 64))]
    ref = reference_outputs(
        AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.bfloat16),
        prompts,
        16,
        tok.pad_token_id,
        tok.eos_token_id,
    )
    got = {}
    for method, calibration, clipping in (("rtn", None, "full"), ("full", rows, "full"), ("search", rows, "search")):
        info = write_compressed(smollm2_dir, tmp_path / method, "w4a16", 64, calibration, clipping)
        assert info["method"].startswith("GPTQ" if calibration else "round-to-nearest")
        got[method] = compare(
            ref,
            reference_outputs(
                load_compressed(tmp_path / method), prompts, 16, tok.pad_token_id, tok.eos_token_id, [r[1] for r in ref]
            ),
            16,
        )
    print({m: (p.token_agreement, p.forced_agreement, p.mean_kl) for m, p in got.items()})
    assert got["search"].mean_kl < 0.25 * got["rtn"].mean_kl and got["full"].mean_kl < 0.5 * got["rtn"].mean_kl
    for method in ("full", "search"):
        assert got[method].forced_agreement >= max(ExportConfig().quantized_min_agreement, got["rtn"].forced_agreement)


@pytest.mark.parametrize("group", [32, 64, 128])
def test_the_packed_w4a16_reads_back_equal_at_each_group_size(tmp_path, group):
    """What the artifact holds is what was chosen: rounding's integers and scales exactly, and GPTQ's
    (calibrated on random rows) on the 4-bit grid and equal to the weights its loader decompresses."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from ferrylm.engine.kernels.int4 import read_w4a16
    from ferrylm.export.vllm_quant import compress_and_save

    def model():
        torch.manual_seed(0)
        cfg = Qwen2Config(
            vocab_size=256,
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            tie_word_embeddings=False,
        )
        return Qwen2ForCausalLM(cfg).to(torch.bfloat16)

    want = {n: m.weight.detach().clone() for n, m in model().named_modules() if n.endswith("proj")}
    compress_and_save(model(), tmp_path / "rtn", "w4a16", group)
    stored = read_w4a16(tmp_path / "rtn")
    assert set(stored) == set(want)
    for name, w in want.items():
        q, scale = round_to_nearest_int4(w, group)
        assert torch.equal(stored[name][0], q) and torch.equal(stored[name][1], scale) and stored[name][2] == group

    rows = [random.Random(i).choices(range(256), k=64) for i in range(8)]
    compress_and_save(model(), tmp_path / "gptq", "w4a16", group, calibration=rows)
    stored = read_w4a16(tmp_path / "gptq")
    held = model()  # the same model with the stored integers times their scales as its weights
    for name, (q, scale, g) in stored.items():
        out_f, in_f = q.shape
        assert g == group and scale.shape == (out_f, in_f // group) and q.min() >= -8 and q.max() <= 7
        deq = (q.float().reshape(out_f, -1, group) * scale.float()[..., None]).reshape(out_f, in_f)
        held.get_submodule(name).weight.data = deq.to(torch.bfloat16)
    ids = torch.tensor([rows[0][:16]])
    with torch.no_grad():  # the loader decompresses the packed file in the model's forward
        got, want_logits = load_compressed(tmp_path / "gptq")(ids).logits.float(), held(ids).logits.float()
    assert (got - want_logits).abs().max() <= 0.01 * want_logits.abs().max()
