"""Triton Python-backend model written by `ferrylm export`: streams greedy text from the merged model
through ferrylm's batch-1 engine (engine "fused": static KV cache; on a GPU bf16, compiled into CUDA
graphs, on the Triton matrix-vector kernel, or on the W4A16 artifact's 4-bit weights), through
transformers' `generate()` (engine "transformers", any architecture), or from the ONNX artifact
(engine "onnx", ONNX Runtime with KV cache).

`text_input` is a prompt already rendered with the chat template, or `messages` a JSON list of chat
messages that the model renders with its own template (as the vLLM endpoint does); each response
carries the next decoded piece of text.

One request streams at a time (the engines run batch 1), in the order they came. Up to FERRYLM_MAX_QUEUE
(`serve.max_queue`) more wait; one beyond that is answered at once with an error that begins "busy"
(code UNAVAILABLE; Triton's HTTP front end sends it as a 400) and nothing is generated for it: retry later. The fused engine's start-up is printed by phase,
its tuning held to FERRYLM_TUNE_BUDGET_S seconds (`serve.tune_budget_s`).
"""

import json
import locale
import os
import queue
import site
import sys
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


def _beside(args, name):
    """A module the export copied beside this file (`1/<name>.py`)."""
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location(
        name, os.path.join(args["model_repository"], args["model_version"], f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _phase(name, seconds):
    print(f"ferrylm: engine {name} {seconds:.1f} s", file=sys.stderr, flush=True)


class TritonPythonModel:
    def initialize(self, args):
        global torch, TextIteratorStreamer  # used by _stream (the transformers engine)
        # The stub's embedded interpreter never sets its locale, so files open as ASCII; torch's
        # inductor templates (imported by the fused engine's W4A16 path) are UTF-8.
        try:
            locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
        except locale.Error:
            pass
        params = {k: v["string_value"] for k, v in json.loads(args["model_config"])["parameters"].items()}
        # The stub runs the interpreter's own environment; torch, transformers (and ferrylm itself,
        # installed editable: hence addsitedir, which reads .pth files) live in the one that exported
        # the model (config.pbtxt's site_packages).
        for path in filter(None, params.get("site_packages", "").split(":")):
            site.addsitedir(path)
        # The stub needs numpy 1 (it garbles string tensors under numpy 2), but packages of the exporting
        # environment may be written for numpy 2 and use the aliases it brought back (seen on a GPU
        # image: `np.long` in what transformers' generation imports). On Linux they are these dtypes.
        for alias, dtype in (("long", np.int64), ("ulong", np.uint64), ("bool", np.bool_)):
            if not hasattr(np, alias):
                setattr(np, alias, dtype)
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(params["model_dir"])
        self.engine = params.get("engine", "transformers")
        self.text_pieces = _beside(args, "text_pieces").TextPieces
        if self.engine == "onnx":
            # The repository carries its engine (ferrylm/export/onnx.py, copied beside this file), so
            # a Triton environment needs only numpy, onnxruntime and tokenizers — not ferrylm or torch.
            self.model = _beside(args, "ferrylm_onnx").OnnxCausalLM(params["model_dir"])
        elif self.engine == "fused":
            import torch

            from ferrylm.engine import Engine

            cuda, w4a16 = torch.cuda.is_available(), params.get("w4a16") == "1"
            budget = os.environ.get("FERRYLM_TUNE_BUDGET_S")
            self.model = Engine.from_pretrained(
                params["model_dir"],
                dtype=torch.bfloat16 if cuda else torch.float32,
                max_len=int(params["max_len"]),
                fused=True,
                w4a16_dir=params["model_dir"] if w4a16 else None,
                gemv=cuda,
                tune_budget_s=float(budget) if budget else None,
                progress=_phase,
            )
            # Tune and capture the step now, so that a ready server answers at full speed. On a GPU both
            # bf16 and the W4A16 artifact run on the engine's own kernels (the 4-bit one decodes faster
            # than torch's int4 kernel: studies/decode_kernels/NOTES.md, "Subnormal weights").
            self.model.warm_up(self.tokenizer("Hello")["input_ids"])
        else:
            import torch
            from transformers import AutoModelForCausalLM, TextIteratorStreamer

            self.model = AutoModelForCausalLM.from_pretrained(params["model_dir"], dtype=torch.float32).eval()
        self.max_queue = int(os.environ.get("FERRYLM_MAX_QUEUE") or 16)
        self.waiting = queue.Queue()
        self.worker = threading.Thread(target=self._serve, daemon=True)
        self.worker.start()

    def execute(self, requests):
        # Returns at once (decoupled): the worker streams; a request past the queue's bound is refused now.
        for request in requests:
            sender = request.get_response_sender()
            if self.waiting.qsize() >= self.max_queue:
                error = pb_utils.TritonError(
                    f"busy: {self.max_queue} requests are already waiting (serve.max_queue); "
                    "nothing was generated for this one: retry later",
                    pb_utils.TritonError.UNAVAILABLE,
                )
                sender.send(
                    pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
            else:
                self.waiting.put((request, sender))
        return None

    def _serve(self):
        while (item := self.waiting.get()) is not None:
            request, sender = item
            try:
                self._stream(request, sender)
            except Exception as e:  # the client gets the error, the server keeps serving
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )

    def finalize(self):
        self.waiting.put(None)  # after the requests already queued: Triton drains them before it unloads
        self.worker.join()

    def _stream(self, request, sender):
        text = pb_utils.get_input_tensor_by_name(request, "text_input")
        messages = pb_utils.get_input_tensor_by_name(request, "messages")
        if (text is None) == (messages is None):
            raise ValueError("send exactly one of text_input (a rendered prompt) and messages (chat JSON)")
        raw = (text or messages).as_numpy().reshape(-1)[0]
        raw = raw.decode() if isinstance(raw, bytes) else str(raw)
        # messages: a JSON list of {role, content}, rendered with the model's own chat template.
        prompt = (
            raw
            if text is not None
            else self.tokenizer.apply_chat_template(json.loads(raw), add_generation_prompt=True, tokenize=False)
        )
        max_t = pb_utils.get_input_tensor_by_name(request, "max_tokens")
        max_tokens = int(max_t.as_numpy().reshape(-1)[0]) if max_t is not None else 256
        flag = pb_utils.get_input_tensor_by_name(request, "ignore_eos")  # exactly max_tokens (latency runs)
        ignore_eos = bool(flag.as_numpy().reshape(-1)[0]) if flag is not None else False
        if self.engine in ("onnx", "fused"):
            return self._stream_tokens(prompt, max_tokens, ignore_eos, sender)
        ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        kwargs = dict(
            **ids,
            max_new_tokens=max_tokens,
            do_sample=False,
            streamer=streamer,
            pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            min_new_tokens=max_tokens if ignore_eos else None,
        )
        worker = threading.Thread(target=self.model.generate, kwargs=kwargs)
        worker.start()
        for piece in streamer:
            if piece:
                out = pb_utils.Tensor("text_output", np.array([piece.encode()], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
        worker.join()
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _stream_tokens(self, prompt, max_tokens, ignore_eos, sender):
        # The engines yield token ids one by one; each response carries the newly completed text.
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        eos = () if ignore_eos else (self.tokenizer.eos_token_id,)
        text = self.text_pieces(self.tokenizer)
        for tok in self.model.stream(ids, max_tokens, eos):
            piece = text.add(tok)
            if piece:  # whole characters only
                out = pb_utils.Tensor("text_output", np.array([piece.encode()], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
