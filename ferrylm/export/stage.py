"""`run_export(cfg)`: the export stage's entry function and its helpers (what the stage does: the
package's docstring)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import Config
from ..diskspace import out_of_space
from ..errors import FerryError
from ..log import get_logger
from ..manifest import StageRecord, locked_stage, read_jsonl, read_record, sha256_file, sha256_tree, write_json_atomic
from ..models import load_model, load_tokenizer, resolve_model_path
from .merge import MergeError, stream_merge
from .parity import compare, parity_device, reference_outputs
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
        raise ExportError(
            f"export.triton_engine=fused: the fused engine supports {', '.join(SUPPORTED)} without "
            f"sliding windows; use auto or transformers for this model"
        )
    return "transformers"


@dataclass
class Reference:
    """What every artifact is held to: the trained model's greedy outputs on the parity prompts
    (base + adapter in PyTorch, as trained), with what it was made from."""

    name: str
    prompts: list
    outputs: list
    tokenizer: object
    lineage: dict
    new_tokens: int
    device: str = "cpu"  # where the reference ran: every artifact's PyTorch model runs there too

    @property
    def continuations(self) -> list[list[int]]:
        """The reference's greedy tokens: every artifact is also scored reading them."""
        return [o[1] for o in self.outputs]

    def check(self, what: str, got, tolerance: float = 0.0):
        parity = compare(self.outputs, got, self.new_tokens, tolerance)
        log.info(
            "parity (%s): %d/%d greedy equal (+%d parting at a near-tie), agreement %.3f free-running, %.3f "
            "forced, max |Δlogit| %.2e, KL %.2e",
            what,
            parity.greedy_tokens_equal,
            parity.prompts,
            parity.greedy_ties,
            parity.token_agreement,
            parity.forced_agreement,
            parity.max_abs_logit_diff,
            parity.mean_kl,
        )
        return parity

    def check_model(self, what: str, model, tolerance: float = 0.0):
        """`check` of a PyTorch model, generating and scored as the reference was."""
        return self.check(
            what,
            reference_outputs(
                model,
                self.prompts,
                self.new_tokens,
                self.tokenizer.pad_token_id,
                self.tokenizer.eos_token_id,
                self.continuations,
                parity_device(model, self.device),
            ),
            tolerance,
        )


def _release(tmp: Path, final: Path, refusal: str | None, manifest: dict) -> None:
    """What every artifact's last steps share: refused, its temporary directory removed, when its
    parity failed; else its manifest written and the directory published in one rename."""
    if refusal:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ExportError(refusal)
    write_json_atomic(tmp / "manifest.json", manifest)
    shutil.rmtree(final, ignore_errors=True)
    tmp.replace(final)


@locked_stage("export")
def run_export(cfg: Config) -> StageRecord:
    """Hold the trained model's outputs as the reference, then write each artifact against it: the
    merged model, ONNX (and its quantized variants), vLLM's quantized formats, the Triton repositories."""
    e = cfg.export
    out = cfg.stage_dir("export")
    record = StageRecord("export", cfg.digest())
    train_rec = read_record(cfg.stage_dir("train"))
    full = train_rec["metrics"]["method"] == "full"  # a whole model: nothing to merge
    trained = Path(train_rec["outputs"]["model" if full else "adapter"])
    base_dir = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
    ref = _reference(cfg, trained, base_dir, full)
    out.mkdir(parents=True, exist_ok=True)
    final, merge_info, parity = _export_merged(cfg, trained, base_dir, full, out, ref)
    record.inputs = ref.lineage
    record.outputs = {"merged": str(final), "manifest": str(final / "manifest.json")}
    record.metrics = {"parity": parity.as_dict(), "merged_sha256": sha256_tree(final), "merge": merge_info}
    engine = _triton_engine(e.triton_engine, final)
    record.outputs["triton_model"] = str(
        write_triton_repo(e.triton_dir, e.triton_name, final, engine, e.triton_max_len)
    )
    record.metrics["triton_engine"], record.metrics["triton_max_len"] = engine, e.triton_max_len
    record.outputs["triton_model_vllm"] = str(write_vllm_backend_repo(e.triton_dir, f"{e.triton_name}-vllm", final))
    if e.onnx:
        record.metrics["onnx"] = _export_onnx_artifacts(cfg, final, out, ref)
        record.outputs.update({f"onnx_{name}": rec["path"] for name, rec in record.metrics["onnx"].items()})
        record.outputs["triton_model_onnx"] = str(
            write_triton_repo(e.triton_dir, f"{e.triton_name}-onnx", out / "onnx" / "fp32", engine="onnx")
        )
    if e.vllm_quantize:
        record.metrics["vllm_quantized"] = {
            kind: _export_vllm_artifact(cfg, kind, final, out, ref) for kind in e.vllm_quantize
        }
        record.outputs.update({f"vllm_{kind}": rec["path"] for kind, rec in record.metrics["vllm_quantized"].items()})
        if "w4a16" in e.vllm_quantize and engine == "fused":  # the engine runs the artifact's own 4-bit weights
            record.outputs["triton_model_w4a16"] = str(
                write_triton_repo(
                    e.triton_dir, f"{e.triton_name}-w4a16", out / "vllm-w4a16", "fused", e.triton_max_len, w4a16=True
                )
            )
    return record.finish(out)


def _reference(cfg: Config, trained: Path, base_dir: Path, full: bool) -> Reference:
    from peft import PeftModel

    expected = "config.json" if full else "adapter_config.json"
    if not (trained / expected).is_file():
        raise ExportError(f"{trained}: no {expected} — run `ferrylm train` first")
    tokenizer = load_tokenizer(trained)
    if full:
        model = load_model(trained)
    else:
        model = PeftModel.from_pretrained(load_model(base_dir), trained)
        _check_adapter(model, trained)
    prompts = _parity_prompts(cfg, tokenizer)
    device = parity_device(model)
    outputs = reference_outputs(
        model, prompts, cfg.export.parity_new_tokens, tokenizer.pad_token_id, tokenizer.eos_token_id, None, device
    )
    return Reference(
        "the fine-tuned model (PyTorch)" if full else "base + adapter (PyTorch)",
        prompts,
        outputs,
        tokenizer,
        _lineage(cfg, base_dir, trained, full),
        cfg.export.parity_new_tokens,
        device,
    )


def _export_merged(cfg: Config, trained: Path, base_dir: Path, full: bool, out: Path, ref: Reference):
    """The adapter folded into the base shard by shard (a full fine-tune: the model cast to
    export.dtype), with the tokenizer and an end-of-turn EOS; greedy tokens must all match."""
    e = cfg.export
    final, tmp = out / "merged", out / ".merged.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with out_of_space("the merged model", tmp, lambda: shutil.rmtree(tmp, ignore_errors=True)):
            merge_info = stream_merge(trained if full else base_dir, None if full else trained, tmp, e.dtype)
    except MergeError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ExportError(str(err)) from err
    ref.tokenizer.save_pretrained(tmp)
    _set_generation_eos(tmp, ref.tokenizer)
    parity = ref.check_model("merged", load_model(tmp), e.max_logit_diff)
    refusal = (
        f"export parity failed: {parity.as_dict()} (export.max_logit_diff={e.max_logit_diff})"
        if not parity.greedy_ok() or parity.max_abs_logit_diff > e.max_logit_diff
        else None
    )
    _release(
        tmp,
        final,
        refusal,
        {
            "artifact": "merged",
            "format": "safetensors",
            "dtype": merge_info["dtype"],
            "merge": merge_info,
            "inputs": ref.lineage,
            "eos_token": ref.tokenizer.eos_token,
            "parity": {"reference": ref.name, **parity.as_dict()},
        },
    )
    return final, merge_info, parity


def _export_vllm_artifact(cfg: Config, kind: str, merged_dir: Path, out: Path, ref: Reference) -> dict:
    """One compressed-tensors artifact (w4a16 or fp8), read back by an independent loader and held to the
    same agreement threshold as the ONNX quantized artifacts."""
    from .onnx import dir_bytes
    from .vllm_quant import QuantizeError, load_compressed, write_compressed

    e = cfg.export
    tmp, final = out / f".vllm-{kind}.tmp", out / f"vllm-{kind}"
    shutil.rmtree(tmp, ignore_errors=True)
    calibration = _calibration_rows(cfg) if kind == "w4a16" and e.w4a16_method == "gptq" else None
    try:
        info = write_compressed(merged_dir, tmp, kind, e.w4a16_group_size, calibration, e.w4a16_clipping)
    except QuantizeError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ExportError(str(err)) from err
    if calibration:
        info["calibration_seed"] = e.calibration_seed
    ref.tokenizer.save_pretrained(tmp)
    _set_generation_eos(tmp, ref.tokenizer)
    parity = ref.check_model(f"vllm {kind}", load_compressed(tmp))
    refusal = _below_agreement(
        f"export.vllm_quantize: {kind}",
        ref.name,
        parity,
        e.quantized_min_agreement,
        "a smaller export.w4a16_group_size keeps closer" if kind == "w4a16" else "",
    )
    info["bytes"] = dir_bytes(tmp)
    _release(
        tmp,
        final,
        refusal,
        {
            "artifact": f"vllm-{kind}",
            **info,
            "inputs": {**ref.lineage, "merged_sha256": sha256_tree(merged_dir)},
            "parity": {
                "reference": ref.name,
                **parity.as_dict(),
                "reader": "transformers (compressed-tensors loader, decompressed)",
            },
        },
    )
    return {"path": str(final), "bytes": info["bytes"], "parity": parity.as_dict(), "scheme": info["scheme"]}


def _below_agreement(what: str, reference: str, parity, threshold: float, hint: str) -> str | None:
    """The quantized artifacts' gate: the refusal when the artifact's top token is the reference's on too
    few steps of the reference's own continuation."""
    if parity.forced_agreement >= threshold:
        return None
    return (
        f"{what} predicts {reference}'s next greedy token on {parity.forced_agreement:.0%} of its steps "
        f"(KL {parity.mean_kl:.3f}), below export.quantized_min_agreement={threshold}" + (f"; {hint}" if hint else "")
    )


def _calibration_rows(cfg: Config, max_tokens: int = 512) -> list[list[int]]:
    """A seeded draw of the data stage's training rows (token ids, cut to `max_tokens`): text of the kind
    the model was trained on, none of it from the held-out repositories the parity prompts come from
    (export.calibration_seed draws them)."""
    import random

    from ..data.encode import load_rows

    rows = load_rows(read_record(cfg.stage_dir("data"))["outputs"]["train"])
    picked = random.Random(cfg.export.calibration_seed).sample(
        range(len(rows)), min(cfg.export.calibration_rows, len(rows))
    )
    return [list(rows[i]["input_ids"])[:max_tokens] for i in sorted(picked)]


def _set_generation_eos(model_dir: Path, tokenizer) -> None:
    """The generation config stops on the chat template's end-of-turn token (what the server stops on)."""
    path = model_dir / "generation_config.json"
    gen = json.loads(path.read_text()) if path.is_file() else {}
    gen.update(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    path.write_text(json.dumps(gen, indent=2))


def _export_onnx_artifacts(cfg: Config, merged_dir: Path, out: Path, ref: Reference) -> dict:
    """fp32 ONNX, then each quantized variant: written, measured against the reference, kept or refused."""
    import time

    from .onnx import OnnxCausalLM, copy_tokenizer, export_onnx, quantize
    from .parity import onnx_outputs

    e = cfg.export
    root = out / "onnx"
    root.mkdir(parents=True, exist_ok=True)
    records = {}
    for name in ["fp32", *e.quantize]:
        tmp, final = root / f".{name}.tmp", root / name
        shutil.rmtree(tmp, ignore_errors=True)
        with out_of_space(f"the ONNX {name} model", tmp, lambda: shutil.rmtree(tmp, ignore_errors=True)):
            info = export_onnx(merged_dir, tmp) if name == "fp32" else quantize(root / "fp32", tmp, name)
        t0 = time.perf_counter()
        got = onnx_outputs(
            OnnxCausalLM(tmp), ref.prompts, e.parity_new_tokens, (ref.tokenizer.eos_token_id,), ref.continuations
        )
        seconds = time.perf_counter() - t0
        parity = ref.check(f"onnx {name}", got, e.onnx_max_logit_diff if name == "fp32" else 0.0)
        refusal = None
        if name == "fp32" and (not parity.greedy_ok() or parity.max_abs_logit_diff > e.onnx_max_logit_diff):
            refusal = (
                f"export.onnx: parity failed {parity.as_dict()} (export.onnx_max_logit_diff={e.onnx_max_logit_diff})"
            )
        elif name != "fp32":
            refusal = _below_agreement(
                f"export.quantize: {name}",
                ref.name,
                parity,
                e.quantized_min_agreement,
                "int8 (per-channel, output layer in fp32) or int4 keep closer" if name == "int8-naive" else "",
            )
        if not refusal:
            copy_tokenizer(merged_dir, tmp)
        speed = sum(len(t) for _, t in got) / seconds
        _release(
            tmp,
            final,
            refusal,
            {
                "artifact": f"onnx-{name}",
                **info,
                "format": "onnx (model.onnx: cached multi-token decode step, prefill on an empty cache)",
                "inputs": {**ref.lineage, "merged_sha256": sha256_tree(merged_dir)},
                "parity": {"reference": ref.name, **parity.as_dict()},
                "parity_run_tokens_per_s": speed,
            },
        )
        records[name] = {
            "path": str(final),
            "bytes": info["bytes"],
            "parity": parity.as_dict(),
            "parity_run_tokens_per_s": speed,
        }
    return records
