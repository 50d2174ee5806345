"""Write a randomly initialised model with Qwen2.5-7B's exact shapes (for GPU runs of the real recipe).

    python benchmarks/make_qwen7b_shape.py OUT_DIR TOKENIZER_DIR [W4A16_GROUP] [--shape 1.5b]

Qwen2.5-7B: Qwen2ForCausalLM, hidden 3584, 28 layers, 28 heads / 4 KV heads, intermediate 18944,
vocab 152064, untied lm_head, 7.62 B parameters. Built on the GPU in bf16 (seconds, not minutes on
CPU), saved as safetensors. The tokenizer is borrowed (Qwen's own is not shipped here); its ids all
fall inside Qwen's vocabulary. With W4A16_GROUP (e.g. 128), the model is written instead as the export's
W4A16 artifact (compressed-tensors pack-quantized, round-to-nearest at that group size: random weights
leave nothing to calibrate on), quantized on the GPU by the export's own code. `--shape 1.5b`: Qwen2.5-Coder-1.5B's
shapes instead (ferrylm/shapes.py), for serving figures of the embedded coder without carrying its GGUF.
"""

import sys
import time

import torch
from transformers import AutoTokenizer, Qwen2ForCausalLM

from ferrylm.shapes import QWEN25_CODER_1_5B, qwen7b_config


def main(out_dir: str, tokenizer_dir: str, w4a16_group: str | None = None, shape: str = "7b") -> None:
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    widths = {k: v for k, v in QWEN25_CODER_1_5B.items() if k != "model_type"} if shape == "1.5b" else {}
    config = qwen7b_config(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **widths
    )
    t = time.time()
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    n = sum(p.numel() for p in model.parameters())
    if w4a16_group:
        from ferrylm.export.vllm_quant import compress_and_save

        print(compress_and_save(model, out_dir, "w4a16", int(w4a16_group)))
    else:
        model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    print(f"wrote {out_dir}: {n / 1e9:.3f} B parameters in {time.time() - t:.0f} s")


if __name__ == "__main__":
    args = sys.argv[1:]
    shape = args.pop(args.index("--shape") + 1) if "--shape" in args else "7b"
    main(*[a for a in args if a != "--shape"][:3], shape=shape)
