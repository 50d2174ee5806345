"""The models ferrylm names, as their config.json's shapes: the one place the planner, the doctor, the
embedded models and the benchmarks take them from; for the benchmarks, a random model of Qwen2.5-7B's shapes
and the products of one decode step (weight [n, k]) with the epilogues the fused step gives them."""

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

# The benchmarks' 7B.
QWEN7B = {k: v for k, v in QWEN25_7B.items() if k != "model_type"}
HIDDEN, INTERMEDIATE, VOCAB = QWEN7B["hidden_size"], QWEN7B["intermediate_size"], QWEN7B["vocab_size"]
LAYERS, HEADS, KV_HEADS = QWEN7B["num_hidden_layers"], QWEN7B["num_attention_heads"], QWEN7B["num_key_value_heads"]
HEAD_DIM = HIDDEN // HEADS
# One decode step's products, as the fused decoder lays them out: q/k/v in one, gate/up in one.
PRODUCTS = {
    "wqkv": ((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN),
    "wo": (HIDDEN, HIDDEN),
    "w13": (2 * INTERMEDIATE, HIDDEN),
    "w2": (HIDDEN, INTERMEDIATE),
    "lm_head": (VOCAB, HIDDEN),
}
LAYER = tuple(PRODUCTS[name] for name in ("wqkv", "wo", "w13", "w2"))


def qwen7b_config(**changes):
    """transformers' Qwen2Config of the 7B shape, with `changes` (e.g. num_hidden_layers=4)."""
    from transformers import Qwen2Config

    return Qwen2Config(**{**QWEN7B, **changes})


def qwen7b_model(device: str = "cuda", seed: int = 0, **changes):
    """A randomly initialised bf16 model of the 7B shape, built on `device` (seconds on a GPU)."""
    import torch
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM(qwen7b_config(**changes)).to(torch.bfloat16).eval()
    model.generation_config.pad_token_id = 0
    return model


def epilogues() -> dict:
    """Each product's epilogue in the fused one-token step (decode_step.epilogues on the 7B shape)."""
    from ferrylm.engine.kernels.gemv import ROPE, SILU, Epilogue

    return {
        "wqkv": Epilogue(1e-6, ROPE, HEAD_DIM, (HEADS + KV_HEADS) * HEAD_DIM),
        "wo": Epilogue(residual=True),
        "w13": Epilogue(1e-6, SILU, 2 * INTERMEDIATE),
        "w2": Epilogue(residual=True),
        "lm_head": Epilogue(1e-6),
    }
