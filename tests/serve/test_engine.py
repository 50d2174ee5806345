"""The batch-1 engine (static cache, compiled decode on GPUs) gives generate()'s greedy tokens."""
import torch
from transformers import AutoModelForCausalLM

from ferrylm.models import load_tokenizer
from ferrylm.serve.engine import Engine, fp8_weights


def test_engine_matches_generate_on_the_real_model(smollm2_dir):
    tok = load_tokenizer(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    ids = tok.apply_chat_template([{"role": "user", "content": "Write a Python function that adds two numbers."}],
                                  add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    want = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False)[0, len(ids):].tolist()
    engine = Engine(model, max_len=256, compile=False, tune=False)
    eos = (tok.eos_token_id,)
    assert list(engine.stream(ids, 24, eos)) == want
    assert list(engine.stream(ids, 24, eos)) == want               # the cache is reset between requests
    timed = engine.generate_timed(ids, 8)
    assert timed["tokens"] == want[:8] and 0 < timed["ttft_s"] <= timed["total_s"]


def test_fp8_weights_stay_close(tiny_qwen2_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.bfloat16)
    x = torch.tensor([[5, 17, 300, 4000, 12]])
    with torch.no_grad():
        ref = model(x).logits.float()
        assert fp8_weights(model) == 2 * 7
        got = model(x).logits.float()
    assert 0 < (got - ref).abs().max().item() < 0.05 * ref.abs().max().item()
