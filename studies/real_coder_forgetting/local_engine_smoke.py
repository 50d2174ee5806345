"""Does the eval's in-process generator build the engine's kernels for Qwen2.5-Coder-1.5B's layer shapes (two layers,
random weights, the tiny test tokenizer), in bf16 and on an export-made W4A16 artifact, and take a 2,500-token prompt?
Prints each engine's start-up, its linear layer type and its greedy text beside transformers' generate().

    PYTHONPATH=$PWD python3 studies/real_coder_forgetting/local_engine_smoke.py   # a CUDA GPU; .cache/ferrylm/tiny-qwen2
"""

import shutil
import time
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from ferrylm.eval.generators import LocalGenerator
from ferrylm.export.vllm_quant import write_compressed
from ferrylm.models import is_w4a16, load_tokenizer

TOKENIZER = Path(".cache/ferrylm/tiny-qwen2")
PROMPTS = [[{"role": "user", "content": f"Write a function number {i} that adds two numbers."}] for i in range(4)]


def with_tokenizer(tok, out: Path, beside: Path) -> None:
    tok.save_pretrained(out)
    for name in ("chat_template.jinja", "generation_config.json"):
        if (beside / name).exists() and not (out / name).exists():
            shutil.copy(beside / name, out / name)


def shaped_model(tok, out: Path) -> Path:
    """Qwen2.5-Coder-1.5B's widths, two layers, random weights (doubled: fewer near ties)."""
    shutil.rmtree(out, ignore_errors=True)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=2,
        num_attention_heads=12,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        rope_theta=1e6,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.0)
    model.save_pretrained(out)
    with_tokenizer(tok, out, TOKENIZER)
    return out


def hf_greedy(g: LocalGenerator, messages: list[dict], n: int) -> str:
    prompt = g.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = g.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to("cuda")
    with torch.no_grad():
        out = g.model.generate(**ids, max_new_tokens=n, do_sample=False, pad_token_id=g.tokenizer.pad_token_id)
    return g.tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)


def check(name: str, model_dir: Path) -> None:
    start = time.time()
    g = LocalGenerator(model_dir)
    layer = type(g.engine.decoder.layers[0].wqkv).__name__ if g.engine.decoder is not None else None
    print(name, "is_w4a16", is_w4a16(model_dir), "ready", round(time.time() - start, 1), "s; layer", layer, flush=True)
    same = 0
    for messages in PROMPTS:
        ours, theirs = g.chat(messages, 48)[0], hf_greedy(g, messages, 48)
        same += ours == theirs
        print(" engine:", repr(ours[:60]), "| generate():", repr(theirs[:60]), flush=True)
    print(name, "48 tokens equal to generate()'s:", same, "/", len(PROMPTS), flush=True)
    start = time.time()
    g.chat([{"role": "user", "content": "word " * 2500}], 64)
    print(name, "a 2,500-token prompt + 64 tokens:", round(time.time() - start, 2), "s", flush=True)


def main() -> None:
    tok = load_tokenizer(TOKENIZER)
    bf16 = shaped_model(tok, Path("/tmp/q15shape"))
    check("bf16", bf16)
    w4a16 = Path("/tmp/q15w4")
    shutil.rmtree(w4a16, ignore_errors=True)
    write_compressed(bf16, w4a16, "w4a16", 128)
    with_tokenizer(tok, w4a16, bf16)
    check("w4a16", w4a16)


if __name__ == "__main__":
    main()
