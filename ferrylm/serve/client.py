"""A small client for OpenAI-compatible endpoints (vLLM's server), plain and streaming, and for a
ferrylm Triton model's generate_stream endpoint."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass

import requests

from ..errors import FerryError


class EndpointError(FerryError, RuntimeError):
    pass


class ServerBusy(EndpointError):
    """The server refused the request for now (its queue is full) and generated nothing: retry later."""


_API_KEY: list[str | None] = [None]


def use_api_key(key: str | None) -> None:
    """Send `key` (`Authorization: Bearer`) with every request of this process (None: no header)."""
    _API_KEY[0] = key


def _post(url: str, payload: dict, timeout: float, stream: bool = False) -> requests.Response:
    headers = {"Authorization": f"Bearer {_API_KEY[0]}"} if _API_KEY[0] else None
    try:
        r = requests.post(url, json=payload, timeout=timeout, stream=stream, headers=headers)
    except requests.RequestException as e:
        raise EndpointError(f"{url}: {e}") from None
    if r.status_code != 200:
        status, text = r.status_code, r.text
        # The error's traceback keeps this frame: a response kept in it keeps its connection open (closing
        # it does not), and a stopping tritonserver waits for every open connection until its drain time is over.
        del r
        # A ferrylm Triton model's full queue: Triton's HTTP front end answers it with 400 and the model's error.
        error = ServerBusy if status in (429, 503) or '"error":"busy:' in text else EndpointError
        raise error(f"{url}: HTTP {status}: {text[:300]}")
    return r


def chat(
    base_url: str,
    model: str,
    messages: list[dict],
    max_tokens: int,
    temperature: float = 0.0,
    n: int = 1,
    timeout: float = 600,
    until=None,
    **extra,
) -> list[str]:
    """n replies to one conversation (the server applies the model's chat template). With `until`
    (a test on the text so far) and n=1 the reply is streamed and the stream closed as soon as the
    test holds; the server then stops generating for it."""
    if until is not None and n == 1 and not extra:
        return [
            read_until(
                stream_text(base_url, model, max_tokens, messages=messages, temperature=temperature, timeout=timeout),
                until,
            )
        ]
    payload = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "n": n,
        **extra,
    }
    body = _post(f"{base_url}/v1/chat/completions", payload, timeout).json()
    return [c["message"]["content"] or "" for c in sorted(body["choices"], key=lambda c: c["index"])]


def read_until(pieces: Iterator[str], done) -> str:
    """A stream's text up to the piece after which `done(text so far)` holds; the stream is then closed,
    which closes its connection, and the server stops generating for it."""
    text = ""
    with closing(pieces):
        for piece in pieces:
            text += piece
            if done(text):
                break
    return text


def complete(
    base_url: str,
    model: str,
    prompt: str,
    max_tokens: int,
    temperature: float = 0.0,
    n: int = 1,
    stop: list[str] | None = None,
    timeout: float = 600,
) -> list[str]:
    """n raw completions of a prompt (no chat template)."""
    payload = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "n": n,
        "stop": stop or [],
    }
    body = _post(f"{base_url}/v1/completions", payload, timeout).json()
    return [c["text"] for c in sorted(body["choices"], key=lambda c: c["index"])]


def prompt_logprobs(base_url: str, model: str, prompt: str | list[int], timeout: float = 300) -> list[float]:
    """The served model's log-probability of each prompt token after the first (text or token ids):
    what it computes, comparable with a local reading of the same weights."""
    payload = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}
    return _post(f"{base_url}/v1/completions", payload, timeout).json()["choices"][0]["logprobs"]["token_logprobs"][1:]


@dataclass
class StreamTiming:
    ttft_s: float  # request sent → first generated text
    total_s: float  # request sent → stream closed
    completion_tokens: int
    text: str = ""  # the reply, pieces joined

    @property
    def tokens_per_s(self) -> float:
        decode = self.total_s - self.ttft_s
        return (self.completion_tokens - 1) / decode if decode > 0 and self.completion_tokens > 1 else 0.0


def _sse(response: requests.Response) -> Iterator[dict]:
    """The JSON chunks of a server-sent-events stream, up to [DONE]."""
    for line in response.iter_lines():
        if not line.startswith(b"data: "):
            continue
        if line == b"data: [DONE]":
            return
        yield json.loads(line[6:])


def stream_text(
    base_url: str,
    model: str,
    max_tokens: int,
    messages: list[dict] | None = None,
    prompt: str | None = None,
    temperature: float = 0.0,
    timeout: float = 600,
) -> Iterator[str]:
    """Pieces of generated text as they arrive: a chat reply (messages) or a raw completion (prompt)."""
    payload = {"model": model, "max_tokens": max_tokens, "temperature": temperature, "stream": True}
    if messages is not None:
        url, payload["messages"] = f"{base_url}/v1/chat/completions", messages
    else:
        url, payload["prompt"] = f"{base_url}/v1/completions", prompt
    with _post(url, payload, timeout, stream=True) as r:
        for chunk in _sse(r):
            for c in chunk.get("choices", []):
                piece = c.get("delta", {}).get("content") if messages is not None else c.get("text")
                if piece:
                    yield piece


def timed_chat_stream(
    base_url: str, model: str, messages: list[dict], max_tokens: int, ignore_eos: bool = True, timeout: float = 600
) -> StreamTiming:
    """Stream a chat completion and time it; ignore_eos makes the server generate exactly max_tokens."""
    payload = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": ignore_eos,
    }
    start = time.perf_counter()
    first = None
    tokens, pieces = 0, []
    with _post(f"{base_url}/v1/chat/completions", payload, timeout, stream=True) as r:
        for chunk in _sse(r):
            pieces += [c["delta"]["content"] for c in chunk.get("choices", []) if c.get("delta", {}).get("content")]
            if first is None and pieces:
                first = time.perf_counter()
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    end = time.perf_counter()
    if first is None:
        raise EndpointError(f"{base_url}: the stream carried no text")
    return StreamTiming(first - start, end - start, tokens, "".join(pieces))


def triton_stream(
    base_url: str,
    model: str,
    max_tokens: int,
    messages: list[dict] | None = None,
    prompt: str | None = None,
    ignore_eos: bool = False,
    timeout: float = 600,
) -> Iterator[str]:
    """Pieces of text from a ferrylm Triton model over Triton's HTTP generate_stream endpoint: a
    chat reply (messages, rendered by the model's template) or the continuation of a raw prompt."""
    payload = {"max_tokens": max_tokens, "ignore_eos": ignore_eos}
    if messages is not None:
        payload["messages"] = json.dumps(messages)
    else:
        payload["text_input"] = prompt
    with _post(f"{base_url}/v2/models/{model}/generate_stream", payload, timeout, stream=True) as r:
        for chunk in _sse(r):
            if "error" in chunk:
                error = ServerBusy if chunk["error"].startswith("busy") else EndpointError
                raise error(f"{base_url}: {chunk['error']}")
            if chunk.get("text_output"):
                yield chunk["text_output"]


def timed_triton_stream(
    base_url: str, model: str, messages: list[dict], max_tokens: int, timeout: float = 600
) -> StreamTiming:
    """timed_chat_stream's measurement through a ferrylm Triton model: exactly max_tokens (ignore_eos)."""
    start = time.perf_counter()
    first = None
    for _piece in triton_stream(base_url, model, max_tokens, messages=messages, ignore_eos=True, timeout=timeout):
        first = first or time.perf_counter()
    end = time.perf_counter()
    if first is None:
        raise EndpointError(f"{base_url}: the stream carried no text")
    return StreamTiming(first - start, end - start, max_tokens)
