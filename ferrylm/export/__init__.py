"""Export stage: fold the adapter into the base, prove parity, write the artifact and its manifest.

Writes `<run>/export/merged/` (safetensors merged shard by shard, tokenizer with its chat
template, a generation config whose EOS is the template's end-of-turn token, `manifest.json`), with
`export.onnx` also `<run>/export/onnx/{fp32,int8,int4,...}/` (one cached decode graph that also prefills, with a KV
cache), with `export.vllm_quantize` `<run>/export/vllm-{w4a16,fp8}/` (compressed-tensors, for vLLM on GPUs),
and the Triton model repositories. Every artifact is held to base + adapter on a fixed
prompt set (greedy tokens, max |Δlogit|, KL) and appears in one rename only once its parity holds.
"""

from .stage import ExportError, run_export

__all__ = ["ExportError", "run_export"]
