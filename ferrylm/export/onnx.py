"""ONNX artifacts with a KV cache: export, a generation loop on ONNX Runtime, and CPU quantization
(INT8 dynamic, INT4 weight-only MatMulNBits).

One graph, `model.onnx`, from transformers' own exporter (torch.onnx, dynamo), captured as a
multi-token decode step: input_ids, position_ids and the cache in, logits and the grown cache out.
Prefill is the same graph on an empty (length-0) cache, so the weights are stored once — half the
size and half the export time of separate prefill and decode graphs. Batch size 1.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

GRAPHS = ("model",)


def export_onnx(model_dir: str | Path, out_dir: str | Path) -> dict:
    """Export a (merged) Hugging Face model directory to out_dir/model.onnx in fp32."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.exporters.exporter_onnx import OnnxConfig, OnnxExporter

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    sample = {"input_ids": torch.tensor([[1, 2, 3, 4, 5, 6]]), "attention_mask": torch.ones(1, 6, dtype=torch.long)}
    t0 = time.perf_counter()
    from transformers.exporters.utils import decompose_for_generation

    step, inputs = decompose_for_generation(model, sample, multi_token_decode=True)["decode"]
    OnnxExporter().export(step, inputs, OnnxConfig(dynamic=True, output_path=str(out_dir / "model.onnx")))
    return {"export_s": time.perf_counter() - t0, "bytes": dir_bytes(out_dir)}


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def _lm_head_nodes(model) -> list[str]:
    """MatMul nodes whose constant weight has the vocabulary as a dimension (the output layer)."""
    dims = {i.name: list(i.dims) for i in model.graph.initializer}
    vocab = max((max(d) for d in dims.values() if len(d) == 2), default=0)
    return [
        n.name for n in model.graph.node if n.op_type == "MatMul" and any(vocab in dims.get(x, []) for x in n.input)
    ]


def quantize(src_dir: str | Path, dst_dir: str | Path, method: str) -> dict:
    """Quantize both graphs. Methods:

    - int8-naive: dynamic INT8, every MatMul, per-tensor scales (what a one-line quantize_dynamic gives);
    - int8: dynamic INT8, per-channel scales, output layer kept in fp32;
    - int4: weight-only 4-bit (MatMulNBits), block 32, symmetric, output layer kept in fp32.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    src_dir, dst_dir = Path(src_dir), Path(dst_dir)
    dst_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for g in GRAPHS:
        src, dst = src_dir / f"{g}.onnx", dst_dir / f"{g}.onnx"
        head = _lm_head_nodes(onnx.load(str(src), load_external_data=False))
        if method in ("int8-naive", "int8"):
            # int8: one scale per output channel, the output layer left in fp32; naive: neither
            careful = {"per_channel": True, "nodes_to_exclude": head} if method == "int8" else {}
            quantize_dynamic(
                str(src),
                str(dst),
                weight_type=QuantType.QInt8,
                op_types_to_quantize=["MatMul"],
                use_external_data_format=True,
                **careful,
            )
        elif method == "int4":
            q = MatMulNBitsQuantizer(
                onnx.load(str(src)), block_size=32, is_symmetric=True, accuracy_level=4, nodes_to_exclude=head
            )
            q.process()
            q.model.save_model_to_file(str(dst), use_external_data_format=True)
        else:
            raise ValueError(f"unknown quantization method {method!r}")
    return {"quantize_s": time.perf_counter() - t0, "bytes": dir_bytes(dst_dir)}


class OnnxCausalLM:
    """Greedy (or sampled) generation over the cached decode graph with ONNX Runtime."""

    def __init__(
        self, onnx_dir: str | Path, providers: list[str] | None = None, threads: int = 0, bound: bool | None = None
    ):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        # onnxruntime-gpu (the gpu install profile) brings CUDA; the CPU build runs everywhere.
        providers = providers or [
            p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in ort.get_available_providers()
        ]
        self.session = ort.InferenceSession(str(Path(onnx_dir) / "model.onnx"), opts, providers=providers)
        # On a GPU the cache stays where it was computed (IO binding): only the ids go in and the last logits
        # come out, instead of every layer's keys and values to the host and back each token.
        on_gpu = self.session.get_providers()[0] == "CUDAExecutionProvider"
        self.bound, self.device = (on_gpu if bound is None else bound), ("cuda" if on_gpu else "cpu")
        self.cache_in = [i.name for i in self.session.get_inputs() if i.name.startswith("input.")]
        # The graph returns as output.<x> what it reads as input.<x>.
        self.cache_out = [n.replace("input.", "output.", 1) for n in self.cache_in]
        self.outputs = [o.name for o in self.session.get_outputs()]
        missing = [n for n in self.cache_out if n not in self.outputs]
        if missing or not self.cache_in:
            raise ValueError(f"{onnx_dir}: model.onnx is not a cached decode graph (missing {missing[:2]})")
        shapes = {i.name: i.shape for i in self.session.get_inputs()}
        # Some torch / transformers versions (torch 2.11 with transformers 5.17, seen on a GPU machine)
        # export the step with an attention_mask input too; it covers the cache and the new tokens.
        self.takes_mask = "attention_mask" in shapes
        # Empty cache for prefill: [batch 1, kv heads, length 0, head dim].
        self.empty = {
            n: np.zeros((1, int(shapes[n][1]), 0, int(shapes[n][3])), dtype=np.float32) for n in self.cache_in
        }

    def _run(self, ids: list[int], start: int, cache: dict) -> dict:
        feed = {
            "input_ids": np.array([ids], dtype=np.int64),
            "position_ids": np.arange(start, start + len(ids), dtype=np.int64)[None],
        }
        if self.takes_mask:
            feed["attention_mask"] = np.ones((1, start + len(ids)), dtype=np.int64)
        if not self.bound:
            return dict(zip(self.outputs, self.session.run(None, {**feed, **cache})))
        binding = self.session.io_binding()
        for name, value in feed.items():
            binding.bind_cpu_input(name, value)
        for name, value in cache.items():  # numpy: the empty cache of a prompt; else the last step's outputs
            binding.bind_cpu_input(name, value) if isinstance(value, np.ndarray) else binding.bind_ortvalue_input(
                name, value
            )
        for name in self.outputs:
            binding.bind_output(name, "cpu" if name == "logits" else self.device)
        self.session.run_with_iobinding(binding)
        out = dict(zip(self.outputs, binding.get_outputs()))
        out["logits"] = out["logits"].numpy()
        return out

    def prompt_logits(self, ids: list[int]) -> np.ndarray:
        return self._run(ids, 0, self.empty)["logits"][0]

    def stream(
        self,
        ids: list[int],
        max_new_tokens: int,
        eos_ids: tuple[int, ...] = (),
        temperature: float = 0.0,
        rng: np.random.Generator | None = None,
    ):
        """Yield new token ids one by one; stops after an EOS id (yielded) or max_new_tokens."""
        got = self._run(ids, 0, self.empty)
        pos = len(ids)
        for step in range(max_new_tokens):
            tok = _pick(got["logits"][0, -1], temperature, rng)
            yield tok
            if tok in eos_ids or step + 1 == max_new_tokens:
                return
            got = self._run([tok], pos, {i: got[o] for i, o in zip(self.cache_in, self.cache_out)})
            pos += 1

    def generate(self, *args, **kwargs) -> list[int]:
        """`stream`'s tokens (the same arguments) as one list."""
        return list(self.stream(*args, **kwargs))


def _pick(logits: np.ndarray, temperature: float, rng) -> int:
    if temperature <= 0:
        return int(np.argmax(logits))
    z = (logits - logits.max()) / temperature
    p = np.exp(z)
    return int((rng or np.random.default_rng()).choice(len(p), p=p / p.sum()))


def copy_tokenizer(src: Path, dst: Path) -> None:
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "special_tokens_map.json",
        "generation_config.json",
        "config.json",
    ):
        if (src / name).is_file():
            shutil.copy(src / name, dst / name)
