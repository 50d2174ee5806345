"""Triton Python-backend model written by `ferrylm export`: streams the merged model's greedy text.

`text_input` is a prompt already rendered with the chat template (what the vLLM endpoint builds
from messages); each response carries the next decoded piece of text.
"""
import json
import sys
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = {k: v["string_value"] for k, v in json.loads(args["model_config"])["parameters"].items()}
        # The stub runs the interpreter's own environment; torch and transformers live in the one
        # that exported the model (config.pbtxt's site_packages).
        for path in filter(None, params.get("site_packages", "").split(":")):
            if path not in sys.path:
                sys.path.insert(0, path)
        global torch, TextIteratorStreamer
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, TextIteratorStreamer

        self.tokenizer = AutoTokenizer.from_pretrained(params["model_dir"])
        self.model = AutoModelForCausalLM.from_pretrained(params["model_dir"], dtype=torch.float32).eval()

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                self._stream(request, sender)
            except Exception as e:  # the client gets the error, the server keeps serving
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    def _stream(self, request, sender):
        prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
        prompt = prompt.decode() if isinstance(prompt, bytes) else str(prompt)
        max_t = pb_utils.get_input_tensor_by_name(request, "max_tokens")
        max_tokens = int(max_t.as_numpy().reshape(-1)[0]) if max_t is not None else 256
        ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        kwargs = dict(**ids, max_new_tokens=max_tokens, do_sample=False, streamer=streamer,
                      pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id)
        worker = threading.Thread(target=self.model.generate, kwargs=kwargs)
        worker.start()
        for piece in streamer:
            if piece:
                out = pb_utils.Tensor("text_output", np.array([piece.encode()], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
        worker.join()
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
