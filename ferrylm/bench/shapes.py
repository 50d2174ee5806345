"""Qwen2.5-7B's shapes for the benchmarks (its config from ferrylm/shapes.py): a random model of them, and
the products of one decode step (weight [n, k]) with the epilogues the fused step gives them."""

from __future__ import annotations

from ..shapes import QWEN25_7B

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
