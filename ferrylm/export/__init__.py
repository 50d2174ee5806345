"""Export stage: fold the adapter into the base, prove parity, write the artifact and its manifest.

Writes `<run>/export/merged/` (safetensors merged shard by shard, tokenizer with its chat
template, a generation config whose EOS is the template's end-of-turn token, `manifest.json`), with
`export.onnx` also `<run>/export/onnx/{fp32,int8,int4,...}/` (one cached decode graph that also prefills, with a KV
cache), with `export.vllm_quantize` `<run>/export/vllm-{w4a16,fp8}/` (compressed-tensors, for vLLM on GPUs),
and the Triton model repositories. Every artifact is held to base + adapter on a fixed
prompt set (greedy tokens, max |Δlogit|, KL) and appears in one rename only once its parity holds.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from ..errors import FerryError
from ..config import Config
from ..data import read_jsonl
from ..log import get_logger
from ..manifest import StageRecord, locked_stage, read_record, sha256_file, sha256_tree, write_json_atomic
from ..models import load_model, load_tokenizer, resolve_model_path
from .parity import compare, reference_outputs
from .merge import MergeError, stream_merge
from .triton import write_triton_repo, write_vllm_backend_repo

log = get_logger("export")


class ExportError(FerryError, RuntimeError):
    pass


def _check_adapter(peft_model, adapter_dir: Path) -> None:
    # An all-zero LoRA B means the "fine-tuned" model is the base model: refuse to ship it silently.
    b = [p for n, p in peft_model.named_parameters() if "lora_B" in n]
    if not b:
        raise ExportError(f"{adapter_dir}: the adapter holds no LoRA weights")
    if all(torch.count_nonzero(p) == 0 for p in b):
        raise ExportError(f"{adapter_dir}: every LoRA B matrix is zero — the adapter was never trained")


def _parity_prompts(cfg: Config, tokenizer) -> list[list[int]]:
    rows = read_jsonl(read_record(cfg.stage_dir("data"))["outputs"]["eval_prompts"], cfg.export.parity_prompts)
    texts = [tokenizer.apply_chat_template(r["messages"], add_generation_prompt=True, tokenize=False) for r in rows]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def _lineage(cfg: Config, base_dir: Path, trained: Path, full: bool) -> dict:
    train_rec = read_record(cfg.stage_dir("train"))
    data_rec = read_record(cfg.stage_dir("data"))
    return {
        "base_model": str(base_dir),
        "base_model_config_sha256": sha256_file(Path(base_dir) / "config.json"),
        ("trained_model_sha256" if full else "adapter_sha256"): sha256_tree(trained),
        "dataset_train_sha256": train_rec["inputs"].get("train.arrow"),
        "data_config_digest": data_rec["config_digest"],
        "config_digest": cfg.digest(),
    }


def _triton_engine(choice: str, model_dir: Path) -> str:
    """export.triton_engine resolved for this model: "auto" is ferrylm's fused engine where it
    computes the architecture exactly (Llama, Qwen2, Mistral), transformers' generate() elsewhere."""
    from transformers import AutoConfig

    from ..engine.fused import SUPPORTED, supports

    if choice == "transformers":
        return choice
    if supports(AutoConfig.from_pretrained(model_dir)):
        return "fused"
    if choice == "fused":
        raise ExportError(f"export.triton_engine=fused: the fused engine supports {', '.join(SUPPORTED)} without "
                          f"sliding windows; use auto or transformers for this model")
    return "transformers"


def _publish(tmp: Path, final: Path) -> None:
    shutil.rmtree(final, ignore_errors=True)
    tmp.replace(final)


@locked_stage("export")
def run_export(cfg: Config) -> StageRecord:
    from peft import PeftModel

    e = cfg.export
    out = cfg.stage_dir("export")
    record = StageRecord("export", cfg.digest())
    train_rec = read_record(cfg.stage_dir("train"))
    trained = train_rec["outputs"]
    base_dir = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
    # A full fine-tune wrote a whole model: nothing to merge, the artifact is that model (cast to
    # export.dtype) and the reference is the model itself.
    full = train_rec["metrics"]["method"] == "full"
    adapter_dir = Path(trained["model"] if full else trained["adapter"])
    expected = "config.json" if full else "adapter_config.json"
    if not (adapter_dir / expected).is_file():
        raise ExportError(f"{adapter_dir}: no {expected} — run `ferrylm train` first")
    tokenizer = load_tokenizer(adapter_dir)

    # The reference every artifact is held to: base + adapter in PyTorch, as trained.
    if full:
        reference = load_model(adapter_dir)
    else:
        reference = PeftModel.from_pretrained(load_model(base_dir), adapter_dir)
        _check_adapter(reference, adapter_dir)
    ref_name = "the fine-tuned model (PyTorch)" if full else "base + adapter (PyTorch)"
    prompts = _parity_prompts(cfg, tokenizer)
    ref = reference_outputs(reference, prompts, e.parity_new_tokens, tokenizer.pad_token_id)
    del reference

    out.mkdir(parents=True, exist_ok=True)
    final, tmp = out / "merged", out / ".merged.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        merge_info = stream_merge(adapter_dir if full else base_dir, None if full else adapter_dir, tmp, e.dtype)
    except MergeError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ExportError(str(err)) from err
    tokenizer.save_pretrained(tmp)
    _set_generation_eos(tmp, tokenizer)
    merged = load_model(tmp)
    parity = compare(ref, reference_outputs(merged, prompts, e.parity_new_tokens, tokenizer.pad_token_id),
                     e.parity_new_tokens)
    del merged
    log.info("parity (merged): %d/%d greedy continuations equal, max |Δlogit| %.2e",
             parity.greedy_tokens_equal, parity.prompts, parity.max_abs_logit_diff)
    if parity.greedy_tokens_equal < parity.prompts or parity.max_abs_logit_diff > e.max_logit_diff:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ExportError(f"export parity failed: {parity.as_dict()} (export.max_logit_diff={e.max_logit_diff})")
    lineage = _lineage(cfg, base_dir, adapter_dir, full)
    manifest = {"artifact": "merged", "format": "safetensors", "dtype": merge_info["dtype"], "merge": merge_info,
                "inputs": lineage, "parity": {"reference": ref_name, **parity.as_dict()},
                "eos_token": tokenizer.eos_token}
    write_json_atomic(tmp / "manifest.json", manifest)
    _publish(tmp, final)

    record.inputs = lineage
    record.outputs = {"merged": str(final), "manifest": str(final / "manifest.json")}
    record.metrics = {"parity": parity.as_dict(), "merged_sha256": sha256_tree(final), "merge": merge_info}
    engine = _triton_engine(e.triton_engine, final)
    record.outputs["triton_model"] = str(write_triton_repo(e.triton_dir, e.triton_name, final, engine, e.triton_max_len))
    record.metrics["triton_engine"] = engine
    record.outputs["triton_model_vllm"] = str(write_vllm_backend_repo(e.triton_dir, f"{e.triton_name}-vllm", final))
    if e.onnx:
        onnx_records = _export_onnx_artifacts(cfg, final, out, prompts, ref, tokenizer, lineage, ref_name)
        record.metrics["onnx"] = onnx_records
        for name, rec in onnx_records.items():
            record.outputs[f"onnx_{name}"] = rec["path"]
        record.outputs["triton_model_onnx"] = str(write_triton_repo(e.triton_dir, f"{e.triton_name}-onnx",
                                                                    out / "onnx" / "fp32", engine="onnx"))
    if e.vllm_quantize:
        record.metrics["vllm_quantized"] = {}
        for kind in e.vllm_quantize:
            rec = _export_vllm_artifact(cfg, kind, final, out, prompts, ref, tokenizer, lineage, ref_name)
            record.metrics["vllm_quantized"][kind] = rec
            record.outputs[f"vllm_{kind}"] = rec["path"]
        if "w4a16" in e.vllm_quantize and engine == "fused":   # the engine runs the artifact's own 4-bit weights
            record.outputs["triton_model_w4a16"] = str(write_triton_repo(
                e.triton_dir, f"{e.triton_name}-w4a16", out / "vllm-w4a16", "fused", max_len, w4a16=True))
    return record.finish(out)


def _export_vllm_artifact(cfg: Config, kind: str, merged_dir: Path, out: Path, prompts, ref, tokenizer, lineage,
                          ref_name) -> dict:
    """One compressed-tensors artifact (w4a16 or fp8), read back by an independent loader and held to the
    same agreement threshold as the ONNX quantized artifacts."""
    from .onnx import dir_bytes
    from .vllm_quant import QuantizeError, load_compressed, write_compressed

    e = cfg.export
    tmp, final = out / f".vllm-{kind}.tmp", out / f"vllm-{kind}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        info = write_compressed(merged_dir, tmp, kind, e.w4a16_group_size)
    except QuantizeError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ExportError(str(err)) from err
    tokenizer.save_pretrained(tmp)
    _set_generation_eos(tmp, tokenizer)
    parity = compare(ref, reference_outputs(load_compressed(tmp), prompts, e.parity_new_tokens, tokenizer.pad_token_id),
                     e.parity_new_tokens)
    log.info("parity (vllm %s): %d/%d greedy equal, agreement %.3f, max |Δlogit| %.2e, KL %.2e", kind,
             parity.greedy_tokens_equal, parity.prompts, parity.token_agreement, parity.max_abs_logit_diff, parity.mean_kl)
    if parity.token_agreement < e.quantized_min_agreement:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ExportError(f"export.vllm_quantize: {kind} agrees with {ref_name} on {parity.token_agreement:.0%} of greedy "
                          f"tokens, below export.quantized_min_agreement={e.quantized_min_agreement}"
                          + ("; a smaller export.w4a16_group_size keeps closer" if kind == "w4a16" else ""))
    info["bytes"] = dir_bytes(tmp)
    manifest = {"artifact": f"vllm-{kind}", **info, "inputs": {**lineage, "merged_sha256": sha256_tree(merged_dir)},
                "parity": {"reference": ref_name, "reader": "transformers (compressed-tensors loader, decompressed)",
                           **parity.as_dict()}}
    write_json_atomic(tmp / "manifest.json", manifest)
    _publish(tmp, final)
    return {"path": str(final), "bytes": info["bytes"], "parity": parity.as_dict(), "scheme": info["scheme"]}


def _set_generation_eos(model_dir: Path, tokenizer) -> None:
    """The generation config stops on the chat template's end-of-turn token (what the server stops on)."""
    path = model_dir / "generation_config.json"
    gen = json.loads(path.read_text()) if path.is_file() else {}
    gen.update(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    path.write_text(json.dumps(gen, indent=2))


def _export_onnx_artifacts(cfg: Config, merged_dir: Path, out: Path, prompts, ref, tokenizer, lineage, ref_name) -> dict:
    """fp32 ONNX, then each quantized variant: written, measured against the reference, kept or refused."""
    import time

    from .onnx import OnnxCausalLM, copy_tokenizer, export_onnx, quantize
    from .parity import onnx_outputs

    e = cfg.export
    root = out / "onnx"
    root.mkdir(parents=True, exist_ok=True)
    eos = (tokenizer.eos_token_id,)
    records = {}
    for name in ["fp32", *e.quantize]:
        tmp, final = root / f".{name}.tmp", root / name
        shutil.rmtree(tmp, ignore_errors=True)
        info = export_onnx(merged_dir, tmp) if name == "fp32" else quantize(root / "fp32", tmp, name)
        lm = OnnxCausalLM(tmp)
        t0 = time.perf_counter()
        got = onnx_outputs(lm, prompts, e.parity_new_tokens, eos)
        seconds = time.perf_counter() - t0
        parity = compare(ref, got, e.parity_new_tokens)
        log.info("parity (onnx %s): %d/%d greedy equal, agreement %.3f, max |Δlogit| %.2e, KL %.2e", name,
                 parity.greedy_tokens_equal, parity.prompts, parity.token_agreement, parity.max_abs_logit_diff, parity.mean_kl)
        failed = None
        if name == "fp32" and (parity.greedy_tokens_equal < parity.prompts or parity.max_abs_logit_diff > e.onnx_max_logit_diff):
            failed = f"export.onnx: parity failed {parity.as_dict()} (export.onnx_max_logit_diff={e.onnx_max_logit_diff})"
        elif name != "fp32" and parity.token_agreement < e.quantized_min_agreement:
            failed = (f"export.quantize: {name} agrees with base+adapter on {parity.token_agreement:.0%} of greedy tokens, "
                      f"below export.quantized_min_agreement={e.quantized_min_agreement}"
                      + ("; int8 (per-channel, output layer in fp32) or int4 keep closer" if name == "int8-naive" else ""))
        if failed:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ExportError(failed)
        copy_tokenizer(merged_dir, tmp)
        new_tokens = sum(len(t) for _, t in got)
        manifest = {"artifact": f"onnx-{name}", "format": "onnx (model.onnx: cached multi-token decode step, prefill on an empty cache)",
                    "inputs": {**lineage, "merged_sha256": sha256_tree(merged_dir)}, **info,
                    "parity": {"reference": ref_name, **parity.as_dict()},
                    "parity_run_tokens_per_s": new_tokens / seconds}
        write_json_atomic(tmp / "manifest.json", manifest)
        _publish(tmp, final)
        records[name] = {"path": str(final), "bytes": info["bytes"], "parity": parity.as_dict(),
                         "parity_run_tokens_per_s": manifest["parity_run_tokens_per_s"]}
    return records
