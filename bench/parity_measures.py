"""How the export's parity measures separate round-to-nearest W4A16 from GPTQ on real weights, on CPU:
greedy-token agreement running free (the export's gate: one early different token changes the rest),
agreement with the reference's tokens forced as the prefix (each step judged on its own), and mean KL.

    .venv/bin/python bench/parity_measures.py --stdlib /usr/lib/python3.11 --out parity_measures_smollm2.json [--methods rtn,gptq]

SmolLM2-135M-Instruct as shipped (not fine-tuned), group 32; calibration: 32 files of a Python standard library
(512 tokens each); 8 other files as "Explain this code" chat prompts, 32 greedy tokens each, against
the fp32 model. Each method's row is written as soon as it is measured.
"""
from __future__ import annotations

import argparse
import glob
import json
import random
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@torch.no_grad()
def forced_agreement(model, prompts: list[list[int]], ref: list[tuple]) -> float:
    """Fraction of the reference's greedy tokens that are the model's top token after the reference's prefix."""
    agree = total = 0
    for ids, (_, cont, *_) in zip(prompts, ref):
        logits = model(input_ids=torch.tensor([ids + cont])).logits[0]
        pred = logits[len(ids) - 1:len(ids) - 1 + len(cont)].argmax(-1).tolist()
        agree += sum(a == b for a, b in zip(pred, cont))
        total += len(cont)
    return agree / max(total, 1)


def main() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ferrylm.export.parity import compare, reference_outputs
    from ferrylm.export.vllm_quant import load_compressed, write_compressed
    from ferrylm.models import convert_embedded

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--methods", default="rtn,gptq")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"], help="where the Python files come from")
    args = ap.parse_args()
    base = str(convert_embedded())
    tok = AutoTokenizer.from_pretrained(base)
    files = sorted(glob.glob(str(Path(args.stdlib) / "*.py")))
    texts = [Path(f).read_text() for f in random.Random(0).sample(files, 60)]
    calibration = [tok(t)["input_ids"][:512] for t in texts[:32]]
    prompts = [list(tok.apply_chat_template([{"role": "user", "content": "Explain this code:\n" + t[:600]}],
                                            add_generation_prompt=True, return_dict=True)["input_ids"]) for t in texts[32:40]]
    reference = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    ref = reference_outputs(reference, prompts, args.new_tokens, tok.pad_token_id, tok.eos_token_id)
    out = {"model": "SmolLM2-135M-Instruct", "group_size": 32, "prompts": len(prompts), "new_tokens": args.new_tokens,
           "calibration_rows": len(calibration), "methods": {}}
    for method in args.methods.split(","):
        t0 = time.time()
        with tempfile.TemporaryDirectory() as d:
            write_compressed(base, d, "w4a16", 32, calibration if method == "gptq" else None)
            model = load_compressed(d)
            p = compare(ref, reference_outputs(model, prompts, args.new_tokens, tok.pad_token_id, tok.eos_token_id),
                        args.new_tokens)
            out["methods"][method] = {"agreement_free_running": p.token_agreement, "greedy_equal": p.greedy_tokens_equal,
                                      "agreement_forced_prefix": forced_agreement(model, prompts, ref),
                                      "mean_kl": p.mean_kl, "seconds": round(time.time() - t0)}
        print(method, out["methods"][method], flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
