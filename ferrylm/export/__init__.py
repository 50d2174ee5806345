"""Export stage: fold the adapter into the base, prove parity, write the artifact and its manifest.

Writes `<run>/export/merged/` (safetensors, tokenizer with its chat template, a generation config
whose EOS is the template's end-of-turn token, `manifest.json`) and the Triton model repository.
Nothing is written unless parity holds: the merged directory appears in one rename at the end.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from ..config import Config
from ..data import read_jsonl
from ..log import get_logger
from ..manifest import StageRecord, read_record, sha256_file, sha256_tree, write_json_atomic
from ..models import load_model, load_tokenizer, resolve_model_path
from .parity import compare, reference_outputs
from .triton import write_triton_repo

log = get_logger("export")


class ExportError(RuntimeError):
    pass


def _check_adapter(peft_model, adapter_dir: Path) -> None:
    # An all-zero LoRA B means the "fine-tuned" model is the base model: refuse to ship it silently.
    b = [p for n, p in peft_model.named_parameters() if "lora_B" in n]
    if not b:
        raise ExportError(f"{adapter_dir}: the adapter holds no LoRA weights")
    if all(torch.count_nonzero(p) == 0 for p in b):
        raise ExportError(f"{adapter_dir}: every LoRA B matrix is zero — the adapter was never trained")


def _parity_prompts(cfg: Config, tokenizer) -> list[list[int]]:
    rows = read_jsonl(cfg.stage_dir("data") / "eval.jsonl", cfg.export.parity_prompts)
    texts = [tokenizer.apply_chat_template(r["messages"], add_generation_prompt=True, tokenize=False) for r in rows]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def run_export(cfg: Config) -> StageRecord:
    from peft import PeftModel

    e = cfg.export
    out = cfg.stage_dir("export")
    record = StageRecord("export", cfg.digest())
    adapter_dir = Path(read_record(cfg.stage_dir("train"))["outputs"]["adapter"])
    if not (adapter_dir / "adapter_config.json").is_file():
        raise ExportError(f"{adapter_dir}: no adapter_config.json — run `ferrylm train` first")
    base_dir = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
    tokenizer = load_tokenizer(adapter_dir)

    model = PeftModel.from_pretrained(load_model(base_dir), adapter_dir)
    _check_adapter(model, adapter_dir)
    prompts = _parity_prompts(cfg, tokenizer)
    ref = reference_outputs(model, prompts, e.parity_new_tokens, tokenizer.pad_token_id)
    merged = model.merge_and_unload()
    parity = compare(ref, reference_outputs(merged, prompts, e.parity_new_tokens, tokenizer.pad_token_id),
                     e.parity_new_tokens)
    log.info("parity: %d/%d greedy continuations equal, max |Δlogit| %.2e",
             parity.greedy_tokens_equal, parity.prompts, parity.max_abs_logit_diff)
    if parity.greedy_tokens_equal < parity.prompts or parity.max_abs_logit_diff > e.max_logit_diff:
        raise ExportError(f"export parity failed: {parity.as_dict()} (export.max_logit_diff={e.max_logit_diff})")

    final = out / "merged"
    tmp = out / ".merged.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    eot = tokenizer.eos_token_id  # the chat template's end-of-turn token
    merged.generation_config.eos_token_id = eot
    merged.generation_config.pad_token_id = tokenizer.pad_token_id
    merged.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    train_rec = read_record(cfg.stage_dir("train"))
    data_rec = read_record(cfg.stage_dir("data"))
    manifest = {
        "artifact": "merged",
        "format": "safetensors",
        "dtype": str(merged.dtype).removeprefix("torch."),
        "inputs": {
            "base_model": str(base_dir),
            "base_model_config_sha256": sha256_file(Path(base_dir) / "config.json"),
            "adapter_sha256": sha256_tree(adapter_dir),
            "dataset_train_sha256": train_rec["inputs"].get("train.arrow"),
            "data_config_digest": data_rec["config_digest"],
            "config_digest": cfg.digest(),
        },
        "parity": {"reference": "base + adapter (PyTorch)", **parity.as_dict()},
        "eos_token": tokenizer.eos_token,
    }
    write_json_atomic(tmp / "manifest.json", manifest)
    shutil.rmtree(final, ignore_errors=True)
    tmp.replace(final)

    triton = write_triton_repo(e.triton_dir, e.triton_name, final)
    record.inputs = manifest["inputs"]
    record.outputs = {"merged": str(final), "manifest": str(final / "manifest.json"), "triton_model": str(triton)}
    record.metrics = {"parity": parity.as_dict(), "merged_sha256": sha256_tree(final)}
    return record.finish(out)
