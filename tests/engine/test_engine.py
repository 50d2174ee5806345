"""The batch-1 engine (static cache, compiled decode on GPUs) gives generate()'s greedy tokens."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from ferrylm.engine import Engine
from ferrylm.models import load_tokenizer


@pytest.mark.slow
def test_engine_matches_generate_on_the_real_model(smollm2_dir):
    tok = load_tokenizer(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "Write a Python function that adds two numbers."}], add_generation_prompt=True
    )
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    want = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False)[0, len(ids) :].tolist()
    engine = Engine(model, max_len=256, compile=False, tune=False)
    eos = (tok.eos_token_id,)
    assert list(engine.stream(ids, 24, eos)) == want
    assert list(engine.stream(ids, 24, eos)) == want  # the cache is reset between requests
    timed = engine.generate_timed(ids, 8)
    assert timed["tokens"] == want[:8] and 0 < timed["ttft_s"] <= timed["total_s"]


@pytest.mark.slow
def test_fused_decoder_gives_generates_tokens_and_logits(smollm2_dir, tiny_qwen2_dir):
    """q/k/v and gate/up fused into one matrix each: the same logits as transformers (Llama: SmolLM2,
    tied embeddings; Qwen2: biases on q/k/v), and generate()'s greedy tokens through the engine."""
    from ferrylm.engine.fused import FusedDecoder

    for model_dir in (smollm2_dir, tiny_qwen2_dir):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        ids = [5, 17, 300, 4000, 12, 99, 1000]
        with torch.no_grad():
            want_logits = model(torch.tensor([ids])).logits
            decoder = FusedDecoder(model, max_len=64)
            got = decoder(torch.tensor([ids]), torch.arange(len(ids)))
            torch.testing.assert_close(got, want_logits, atol=1e-4, rtol=1e-4)
            # One token on top of the cache equals the full sequence's last position.
            step = decoder(torch.tensor([[77]]), torch.tensor([len(ids)]))
            full = model(torch.tensor([ids + [77]])).logits[:, -1:]
            torch.testing.assert_close(step, full, atol=1e-4, rtol=1e-4)
        want = model.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False)[0, len(ids) :].tolist()
        engine = Engine(model, max_len=64, compile=False, tune=False, fused=True)
        assert list(engine.stream(ids, 20)) == want
        assert engine.generate_timed(ids, 20)["tokens"] == want  # the cache is reset between requests
        # The prompt padded to a bucket (as the GPU's captured prefill runs it): the same tokens, and a
        # shorter prompt after a longer one in the same bucket is not disturbed by the longer one's rest.
        padded = Engine(model, max_len=64, compile=False, tune=False, fused=True, prefill_bucket=16)
        longer = model.generate(torch.tensor([ids + [7, 8, 9]]), max_new_tokens=4, do_sample=False)[0, len(ids) + 3 :]
        assert padded.generate_timed(ids + [7, 8, 9], 4)["tokens"][: len(longer)] == longer.tolist()  # (to its EOS)
        assert list(padded.stream(ids, 20)) == want
        assert padded.generate_timed(ids, 20)["tokens"] == want


def test_fused_decoder_refuses_other_architectures(tiny_qwen2_dir):
    import pytest

    from ferrylm.engine.fused import FusedDecoder, UnsupportedModel

    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32)
    model.config.model_type = "gpt2"
    with pytest.raises(UnsupportedModel, match="not gpt2"):
        FusedDecoder(model, max_len=16)


def test_int4_kernel_equals_its_dequantized_weights():
    """torch's int4 kernel with our packing computes x @ (q * scale)^T: the 4-bit layer is exactly the
    round-to-nearest weights, so its only error is the rounding (bf16 products aside)."""
    from ferrylm.engine.kernels.int4 import Int4WeightLinear, round_to_nearest_int4

    torch.manual_seed(0)
    w = torch.randn(96, 576)
    q, scale = round_to_nearest_int4(w, 64)
    assert q.min() >= -8 and q.max() <= 7 and scale.shape == (96, 9)
    deq = (q.float().reshape(96, 9, 64) * scale.float()[..., None]).reshape(96, 576)
    bias = torch.randn(96)
    x = torch.randn(3, 576)
    got = Int4WeightLinear(q, scale, bias, 64)(x.bfloat16()).float()
    want = x.bfloat16().float() @ deq.t() + bias.bfloat16().float()
    assert (got - want).abs().max().item() < 0.02 * want.abs().max().item()
    assert (deq - w).abs().max().item() <= scale.float().max().item() * 0.5 + 1e-6  # rounding is within half a step


def test_the_4bit_kernels_layer_computes_torchs_int4_layer():
    """The Triton 4-bit layer (gemv4.py) packs the same integers and scales: its prompt path (fp32 on the
    dequantized weight, the norm's weight first) gives torch's int4 kernel's outputs."""
    from ferrylm.engine.kernels.int4 import Int4WeightLinear, round_to_nearest_int4
    from ferrylm.engine.kernels.linear import Gemv4Linear

    torch.manual_seed(0)
    w, bias, x, g = torch.randn(96, 576), torch.randn(96), torch.randn(3, 576), torch.rand(576) + 0.5
    q, scale = round_to_nearest_int4(w.bfloat16(), 32)
    layer = Gemv4Linear(q, scale, bias.bfloat16(), 32)
    assert layer.packed.shape == (12, 72, 8) and layer.scales.shape == (12, 18, 8) and layer.cfg is None  # strips of 8
    want = Int4WeightLinear(q, scale, bias, 32)(x.bfloat16()).float()
    torch.testing.assert_close(layer(x.bfloat16()).float(), want, atol=0.02 * want.abs().max().item(), rtol=0)
    layer.norm_weight = g.bfloat16()
    torch.testing.assert_close(
        layer(x.bfloat16()).float(),
        Int4WeightLinear(q, scale, bias, 32)(g.bfloat16() * x.bfloat16()).float(),
        atol=0.02 * want.abs().max().item(),
        rtol=0,
    )


def test_stream_reads_ahead_yet_stops_at_eos_and_the_next_prompt_is_untouched(tiny_qwen2_dir):
    """The stream keeps steps queued ahead of the token it yields (Engine.STREAM_AHEAD): the tokens are
    still generate()'s, a stream ends right after its EOS though steps beyond it ran, and a request after
    one cut short (EOS, or a consumer that hangs up) starts clean. The start-up is timed by phase."""
    phases = []
    engine = Engine.from_pretrained(
        tiny_qwen2_dir,
        dtype=torch.float32,
        device="cpu",
        max_len=64,
        compile=False,
        tune=False,
        fused=True,
        progress=lambda name, s: phases.append(name),
    )
    model = engine.model
    ids = [5, 17, 300, 4000, 12, 99, 1000]
    want = model.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False)[0, len(ids) :].tolist()
    assert list(engine.stream(ids, 20)) == want
    eos = want[5]
    cut = want[: want.index(eos) + 1]
    assert list(engine.stream(ids, 20, (eos,))) == cut  # stopped at its EOS, steps ahead discarded
    stream = engine.stream(ids, 20)
    assert [next(stream) for _ in range(3)] == want[:3]
    stream.close()  # a consumer that hung up
    other = [9, 8, 7, 6]
    assert (
        list(engine.stream(other, 12))
        == model.generate(torch.tensor([other]), max_new_tokens=12, do_sample=False)[0, len(other) :].tolist()
    )
    assert list(engine.stream(ids, 1)) == want[:1]
    engine.warm_up(ids)
    assert phases == ["load", "convert", "capture"] and list(engine.phases) == phases
    assert all(s >= 0 for s in engine.phases.values())


def test_the_names_the_benchmarks_and_studies_drive_the_engine_by(tiny_qwen2_dir):
    """prefill, position, captured, run_eagerly, tuned_file: the public hooks benchmarks/gpu_decode.py and the decode
    kernel studies use instead of the engine's own state (the captured step's recapture/capture_at need CUDA)."""
    engine = Engine.from_pretrained(
        tiny_qwen2_dir, dtype=torch.float32, device="cpu", max_len=64, compile=False, tune=False, fused=True
    )
    ids = [5, 17, 300, 4000]
    want = engine.model.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False)[0, len(ids) :].tolist()
    assert int(engine.prefill(ids, 8)) == want[0]
    start = engine.position()
    start += 5  # a copy: the engine's own position stays
    assert int(engine.position()) == len(ids) and int(start) == len(ids) + 5
    assert engine.captured() == {"step": False, "prefill": False} and engine.tuned_file is None
    engine.run_eagerly()
    assert list(engine.stream(ids, 8)) == want
