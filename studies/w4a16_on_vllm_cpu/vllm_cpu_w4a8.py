"""Does vLLM's CPU build serve a W4A16 artifact as written? Prompt log-probabilities, summed |differences|.

    .venv/bin/python studies/w4a16_on_vllm_cpu/vllm_cpu_w4a8.py --out vllm_cpu_w4a8.json

On CPUs with AMX the CPU build runs 4-bit weights with int8 activations (W4A8) unless
VLLM_CPU_INT4_W4A8=0. For the real SmolLM2 (the embedded base model) quantized by the export's own
writer at group 64, by rounding and by GPTQ on 16 rows of standard-library code, each artifact is
served with that variable at 1 (vLLM's default) and at 0 (what `ferrylm serve` now sets), and its
prompt log-probabilities on three code prompts are compared with:
- X: transformers' reading of the same artifact (compressed-tensors' loader): what was exported;
- Y (no server): that reading against the bf16 model: what the 4 bits cost;
- Z: the bf16 model.
The noise floor: vLLM serving the bf16 model itself against transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import sysconfig
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]

PROMPTS = [
    "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return",  # the end-to-end test's
    'import os\n\n\ndef list_python_files(root):\n    """Return every .py file under root."""\n    out = []\n'
    "    for dirpath, _, names in os.walk(root):",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n"
    "        self.items.append(x)\n\n    def pop(self):",
]


def transformers_logprobs(model, prompts: list[list[int]]) -> list[list[float]]:
    out = []
    with torch.no_grad():
        for ids in prompts:
            logp = model(torch.tensor([ids])).logits[0].float().log_softmax(-1)
            out.append([logp[j, ids[j + 1]].item() for j in range(len(ids) - 1)])
    return out


def served_logprobs(model_dir: Path, prompts: list[list[int]], base: Path, work: Path) -> list[list[float]]:
    from ferrylm.config import load_config
    from ferrylm.serve import server_for
    from ferrylm.serve.client import prompt_logprobs
    from ferrylm.serve.process import free_port

    cfg = load_config("default", [f"run_dir={work / 'run'}", f"model.path={base}"])
    with server_for(cfg, model_dir, port=free_port()) as server:
        return [prompt_logprobs(server.url, "ferrylm", ids) for ids in prompts]


def distance(a, b) -> list[float]:
    return [round(sum(abs(x - y) for x, y in zip(p, q)), 3) for p, q in zip(a, b)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/vllm_cpu_w4a8")
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM

    from ferrylm.export.vllm_quant import load_compressed, write_compressed
    from ferrylm.models import convert_embedded, load_tokenizer

    work = Path(args.work)
    base = convert_embedded(REPO / ".cache" / "ferrylm")
    tok = load_tokenizer(base)
    prompts = [tok(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    text = "".join(
        Path(sysconfig.get_paths()["stdlib"], n).read_text() for n in ("textwrap.py", "shlex.py", "fractions.py")
    )
    ids = tok(text, add_special_tokens=False)["input_ids"]
    calibration = [ids[i * 512 : (i + 1) * 512] for i in range(16)]
    bf16 = transformers_logprobs(AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16).eval(), prompts)
    result = {
        "cpu_amx": torch.cpu._is_amx_tile_supported(),
        "tokens": [len(p) - 1 for p in prompts],
        "bf16 served vs transformers (noise floor)": distance(served_logprobs(base, prompts, base, work), bf16),
    }
    print(json.dumps(result), flush=True)
    for method, calib in (("round-to-nearest", None), ("gptq, 16 rows", calibration)):
        art = work / method.split(",")[0]
        write_compressed(base, art, "w4a16", 64, calib)
        tok.save_pretrained(art)
        reading = transformers_logprobs(load_compressed(art), prompts)
        row = {"Y reading vs bf16": distance(reading, bf16)}
        for w4a8 in ("1", "0"):
            os.environ["VLLM_CPU_INT4_W4A8"] = w4a8  # the server's environment starts from ours
            served = served_logprobs(art, prompts, base, work)
            row[f"VLLM_CPU_INT4_W4A8={w4a8}"] = {
                "X served vs reading": distance(served, reading),
                "Z served vs bf16": distance(served, bf16),
            }
        result[method] = row
        print(method, json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
