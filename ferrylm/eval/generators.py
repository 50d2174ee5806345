"""Where completions come from: a served endpoint (OpenAI API: vLLM, or any compatible server), a
ferrylm Triton model, or a local model run with transformers. All answer the same two calls, so
HumanEval and BLEU measure them the same way."""

from __future__ import annotations

import time
from pathlib import Path

from ..log import get_logger
from ..serve import client

log = get_logger("eval")

# A stop test on the text so far runs every this many tokens: decoding at every step would cost
# more than the tokens it saves.
_UNTIL_EVERY = 8


class EndpointGenerator:
    timed_stream = staticmethod(client.timed_chat_stream)  # one timed request, for the latency measurement

    def __init__(self, base_url: str, model: str):
        self.base_url, self.model = base_url.rstrip("/"), model

    def chat(
        self, messages: list[dict], max_tokens: int, temperature: float = 0.0, n: int = 1, until=None
    ) -> list[str]:
        return client.chat(self.base_url, self.model, messages, max_tokens, temperature, n=n, until=until)

    def complete(
        self, prompt: str, max_tokens: int, temperature: float = 0.0, n: int = 1, stop: list[str] | None = None
    ) -> list[str]:
        # The OpenAI API (and vLLM) take at most 4 stop sequences; apply the rest here.
        stop = stop or []
        texts = client.complete(self.base_url, self.model, prompt, max_tokens, temperature, n=n, stop=stop[:4])
        return [_cut(t, stop[4:]) for t in texts]


class TritonGenerator:
    """A ferrylm Triton model (serve.backend=triton) over Triton's generate_stream endpoint. Its engines
    decode greedily: one sample at temperature 0 (the config refuses others for this path). A reply
    stops being read as soon as `until` holds or a stop sequence appears; closing the stream ends it."""

    timed_stream = staticmethod(client.timed_triton_stream)

    def __init__(self, base_url: str, model: str):
        self.base_url, self.model = base_url.rstrip("/"), model

    BUSY_WAIT_S = 600  # how long a request refused as busy (the server's queue full) is asked again

    def _read(self, max_tokens: int, done, **request) -> str:
        # A busy refusal generated nothing: asking again loses nothing (eval.concurrency may exceed serve.max_queue).
        deadline, pause = time.monotonic() + self.BUSY_WAIT_S, 0.2
        while True:
            try:
                return client.read_until(client.triton_stream(self.base_url, self.model, max_tokens, **request), done)
            except client.ServerBusy:
                if time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 5.0)

    @staticmethod
    def _greedy(temperature: float, n: int) -> None:
        if temperature != 0 or n != 1:
            raise ValueError(
                f"the Triton model decodes greedily: one sample at temperature 0, not n={n} at {temperature}"
            )

    def chat(
        self, messages: list[dict], max_tokens: int, temperature: float = 0.0, n: int = 1, until=None
    ) -> list[str]:
        self._greedy(temperature, n)
        return [self._read(max_tokens, until or (lambda text: False), messages=messages)]

    def complete(
        self, prompt: str, max_tokens: int, temperature: float = 0.0, n: int = 1, stop: list[str] | None = None
    ) -> list[str]:
        self._greedy(temperature, n)
        stop = stop or []
        return [_cut(self._read(max_tokens, lambda text: any(s in text for s in stop), prompt=prompt), stop)]


class LocalGenerator:
    """The model in this process, one request at a time (a lock keeps the evaluator's worker threads
    from sharing it). On a GPU it runs in bf16 and greedy requests go through the serving engine on its
    own kernels, as the engine's backend serves it (Triton matrix-vector kernels, a captured step; an
    export's W4A16 artifact on its own 4-bit integers): generate()'s tokens at a fraction of its time;
    on the CPU, transformers' generate in fp32."""

    def __init__(self, model_dir: str | Path, max_len: int = 4096):
        import threading

        import torch

        from ..models import load_model, load_tokenizer

        self.tokenizer = load_tokenizer(model_dir)
        cuda = torch.cuda.is_available()
        self.model = load_model(model_dir, torch.bfloat16 if cuda else None).eval()
        self.engine, self.max_len = None, max_len
        if cuda:
            self.model = self.model.to("cuda")
            self.engine = _engine(self.model, model_dir, max_len)
            eos = self.model.generation_config.eos_token_id
            self.eos_ids = tuple(eos if isinstance(eos, list) else [eos] if eos is not None else []) + (
                (self.tokenizer.eos_token_id,) if self.tokenizer.eos_token_id is not None else ()
            )
        self._lock = threading.Lock()

    def _generate(self, prompt: str, max_tokens: int, temperature: float, n: int, until=None) -> list[str]:
        import torch

        ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        prompt_ids = ids["input_ids"][0].tolist()
        if self.engine is not None and n == 1 and temperature == 0 and len(prompt_ids) + max_tokens <= self.max_len:
            tokens: list[int] = []
            with self._lock:
                for i, token in enumerate(self.engine.stream(prompt_ids, max_tokens, self.eos_ids), 1):
                    tokens.append(token)
                    if (
                        until is not None
                        and i % _UNTIL_EVERY == 0
                        and until(self.tokenizer.decode(tokens, skip_special_tokens=True))
                    ):
                        break
            return [self.tokenizer.decode(tokens, skip_special_tokens=True)]
        kwargs = {
            "do_sample": temperature > 0,
            "max_new_tokens": max_tokens,
            "num_return_sequences": n,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if temperature > 0:
            kwargs["temperature"] = temperature
        if until is not None and n == 1:
            kwargs["stopping_criteria"] = [_Until(self.tokenizer, ids["input_ids"].shape[1], until)]
        with self._lock, torch.no_grad():
            out = self.model.generate(**ids.to(self.model.device), **kwargs)
        return [self.tokenizer.decode(row[ids["input_ids"].shape[1] :], skip_special_tokens=True) for row in out]

    def chat(
        self, messages: list[dict], max_tokens: int, temperature: float = 0.0, n: int = 1, until=None
    ) -> list[str]:
        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self._generate(prompt, max_tokens, temperature, n, until)

    def complete(
        self, prompt: str, max_tokens: int, temperature: float = 0.0, n: int = 1, stop: list[str] | None = None
    ) -> list[str]:
        texts = self._generate(prompt, max_tokens, temperature, n)
        return [_cut(t, stop or []) for t in texts]


def _engine(model, model_dir, max_len: int):
    """The serving engine for `model` (on a GPU): its kernels where the decoder computes the layout (the
    W4A16 artifact's own 4-bit integers when `model_dir` is one), else the compiled step; a layout its
    kernels cannot build falls back to the compiled step, said once."""
    from ..engine import Engine
    from ..engine.fused import supports
    from ..models import is_w4a16

    if not supports(model.config):
        return Engine(model, max_len=max_len)
    try:
        return Engine(model, max_len=max_len, gemv=True, w4a16_dir=str(model_dir) if is_w4a16(model_dir) else None)
    except Exception as err:  # noqa: BLE001 — the compiled step answers the same questions, slower
        log.warning("%s: the engine's kernels could not be built (%s); the compiled step instead", model_dir, err)
        return Engine(model, max_len=max_len, fused=True)


class _Until:
    """generate()'s stopping criterion from a test on the text generated so far."""

    def __init__(self, tokenizer, prompt_len: int, until):
        self.tokenizer, self.prompt_len, self.until = tokenizer, prompt_len, until

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        new = input_ids.shape[1] - self.prompt_len
        done = (
            new > 0
            and new % _UNTIL_EVERY == 0
            and self.until(self.tokenizer.decode(input_ids[0, self.prompt_len :], skip_special_tokens=True))
        )
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


def _cut(text: str, stops: list[str]) -> str:
    """Truncate at the first stop sequence, as a server does."""
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=len(text))
    return text[:cut]
