"""The models ferrylm names, as their config.json's shapes: the one place the planner, the doctor, the
embedded models and the benchmarks take them from."""

from __future__ import annotations


def _qwen2(hidden: int, layers: int, heads: int, kv_heads: int, intermediate: int, vocab: int, tied: bool) -> dict:
    return {
        "model_type": "qwen2",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": intermediate,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
    }


# The seeds' model, the size every preset plans for (random weights of it on the GPU benchmarks).
QWEN25_7B = _qwen2(3584, 28, 28, 4, 18944, 152064, tied=False) | {
    "max_position_embeddings": 32768,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
}
# The embedded real models (their GGUFs' own output.weight: not tied).
QWEN25_CODER_1_5B = _qwen2(1536, 28, 12, 2, 8960, 151936, tied=False)
QWEN25_CODER_0_5B = _qwen2(896, 24, 14, 2, 4864, 151936, tied=False)
# The embedded default (SmolLM2-135M-Instruct, a Llama layout).
SMOLLM2_135M = {
    "model_type": "llama",
    "hidden_size": 576,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "intermediate_size": 1536,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
}
