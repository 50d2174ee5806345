"""How the export's parity measures separate the quantized artifacts on real weights, on CPU: greedy-token
agreement running free (one early different token changes the rest), agreement with the reference's
tokens forced as the prefix (each step judged on its own: the export's gate), and mean KL; for W4A16
round-to-nearest and GPTQ, and the ONNX int8 and int4 variants.

    .venv/bin/python studies/parity_measures/parity_measures.py --stdlib /usr/lib/python3.11 --out studies/parity_measures/results/parity_measures_smollm2.json \
        [--methods rtn,gptq,onnx-int8,onnx-int4]

SmolLM2-135M-Instruct as shipped (not fine-tuned), group 32; calibration: 32 files of a Python standard library
(512 tokens each); 8 other files as "Explain this code" chat prompts, 32 greedy tokens each, against
the fp32 model (ONNX: its fp32 export, then each variant). Each method's row is written as soon as it is measured.
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import sysconfig
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ferrylm.export.onnx import OnnxCausalLM, export_onnx, quantize
    from ferrylm.export.parity import compare, onnx_outputs, reference_outputs
    from ferrylm.export.vllm_quant import load_compressed, write_compressed
    from ferrylm.models import convert_embedded

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--methods", default="rtn,gptq,onnx-int8,onnx-int4")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"], help="where the Python files come from")
    args = ap.parse_args()
    base = str(convert_embedded())
    tok = AutoTokenizer.from_pretrained(base)
    files = sorted(glob.glob(str(Path(args.stdlib) / "*.py")))
    texts = [Path(f).read_text() for f in random.Random(0).sample(files, 60)]
    calibration = [tok(t)["input_ids"][:512] for t in texts[:32]]
    prompts = [
        list(
            tok.apply_chat_template(
                [{"role": "user", "content": "Explain this code:\n" + t[:600]}],
                add_generation_prompt=True,
                return_dict=True,
            )["input_ids"]
        )
        for t in texts[32:40]
    ]
    reference = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    ref = reference_outputs(reference, prompts, args.new_tokens, tok.pad_token_id, tok.eos_token_id)
    out = {
        "model": "SmolLM2-135M-Instruct",
        "group_size": 32,
        "prompts": len(prompts),
        "new_tokens": args.new_tokens,
        "calibration_rows": len(calibration),
        "methods": {},
    }
    forced = [r[1] for r in ref]
    onnx_dir = tempfile.TemporaryDirectory()
    for method in args.methods.split(","):
        t0 = time.time()
        if method.startswith("onnx-"):
            if not (Path(onnx_dir.name) / "fp32").is_dir():
                export_onnx(base, Path(onnx_dir.name) / "fp32")
            quantize(Path(onnx_dir.name) / "fp32", Path(onnx_dir.name) / method, method[5:])
            got = onnx_outputs(
                OnnxCausalLM(Path(onnx_dir.name) / method), prompts, args.new_tokens, (tok.eos_token_id,), forced
            )
        else:
            with tempfile.TemporaryDirectory() as d:
                write_compressed(base, d, "w4a16", 32, calibration if method == "gptq" else None)
                got = reference_outputs(
                    load_compressed(d), prompts, args.new_tokens, tok.pad_token_id, tok.eos_token_id, forced
                )
        p = compare(ref, got, args.new_tokens)
        out["methods"][method] = {
            "agreement_free_running": p.token_agreement,
            "greedy_equal": p.greedy_tokens_equal,
            "agreement_forced_prefix": p.forced_agreement,
            "mean_kl": p.mean_kl,
            "seconds": round(time.time() - t0),
        }
        print(method, out["methods"][method], flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
