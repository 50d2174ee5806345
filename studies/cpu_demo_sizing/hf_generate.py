"""transformers generate() speed of the embedded SmolLM2 in fp32 on this CPU, batch 1 and 8, 128 tokens.
.venv/bin/python studies/cpu_demo_sizing/hf_generate.py CACHE_DIR"""

import sys
import time

import torch

from ferrylm.models import load_model, load_tokenizer, resolve_model_path

d = resolve_model_path("smollm2", sys.argv[1])
tok, model = load_tokenizer(d), load_model(d, None).eval()
tok.padding_side = "left"
prompt = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
for bs in (1, 8):
    ids = tok([prompt] * bs, return_tensors="pt", padding=True)
    t = time.time()
    with torch.no_grad():
        model.generate(**ids, max_new_tokens=128, min_new_tokens=128, do_sample=False, pad_token_id=tok.pad_token_id)
    print(f"batch {bs}: {bs * 128 / (time.time() - t):.1f} tok/s")
