"""Where completions come from: a served endpoint (OpenAI API: vLLM, or any compatible server) or a
local model run with transformers. Both answer the same two calls, so HumanEval and BLEU measure
them the same way."""
from __future__ import annotations

from pathlib import Path

from ..serve import client


class EndpointGenerator:
    def __init__(self, base_url: str, model: str):
        self.base_url, self.model = base_url.rstrip("/"), model

    def chat(self, messages: list[dict], max_tokens: int, temperature: float = 0.0, n: int = 1) -> list[str]:
        return client.chat(self.base_url, self.model, messages, max_tokens, temperature, n=n)

    def complete(self, prompt: str, max_tokens: int, temperature: float = 0.0, n: int = 1,
                 stop: list[str] | None = None) -> list[str]:
        # The OpenAI API (and vLLM) take at most 4 stop sequences; apply the rest here.
        stop = stop or []
        texts = client.complete(self.base_url, self.model, prompt, max_tokens, temperature, n=n, stop=stop[:4])
        return [_cut(t, stop[4:]) for t in texts]


class LocalGenerator:
    """transformers generate on a local model directory; one request at a time (a lock keeps the
    evaluator's worker threads from sharing the model concurrently)."""

    def __init__(self, model_dir: str | Path):
        import threading

        from ..models import load_model, load_tokenizer

        self.tokenizer = load_tokenizer(model_dir)
        self.model = load_model(model_dir).eval()
        self._lock = threading.Lock()

    def _generate(self, prompt: str, max_tokens: int, temperature: float, n: int) -> list[str]:
        import torch

        ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        kwargs = {"do_sample": temperature > 0, "max_new_tokens": max_tokens, "num_return_sequences": n,
                  "pad_token_id": self.tokenizer.pad_token_id}
        if temperature > 0:
            kwargs["temperature"] = temperature
        with self._lock, torch.no_grad():
            out = self.model.generate(**ids, **kwargs)
        return [self.tokenizer.decode(row[ids["input_ids"].shape[1]:], skip_special_tokens=True) for row in out]

    def chat(self, messages: list[dict], max_tokens: int, temperature: float = 0.0, n: int = 1) -> list[str]:
        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self._generate(prompt, max_tokens, temperature, n)

    def complete(self, prompt: str, max_tokens: int, temperature: float = 0.0, n: int = 1,
                 stop: list[str] | None = None) -> list[str]:
        texts = self._generate(prompt, max_tokens, temperature, n)
        return [_cut(t, stop or []) for t in texts]


def _cut(text: str, stops: list[str]) -> str:
    """Truncate at the first stop sequence, as a server does."""
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=len(text))
    return text[:cut]
