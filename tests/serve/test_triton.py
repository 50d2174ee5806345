"""A real tritonserver (the one bundled in nvidia-pytriton) serving the Triton repository the export
stage writes: streamed text equals local greedy generation for each engine (ferrylm's fused engine,
transformers' generate(), the fused engine on a W4A16 artifact), bad requests get errors and the
server stays up, requests past the queue's bound are refused as busy while the others stream whole, the
engine's start-up is printed by phase, SIGTERM drains a stream in flight, an occupied port is one clear error."""

import importlib.util
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
import torch

from ferrylm.eval.generators import TritonGenerator
from ferrylm.export.triton import write_triton_repo
from ferrylm.models import is_w4a16, load_model, load_tokenizer
from ferrylm.serve import ServeError, TritonServer, free_port
from ferrylm.serve.client import EndpointError, ServerBusy, triton_stream
from tests.conftest import CACHE

# Only the server binary of the wheel is used (installed with --no-deps: its Python API does not import).
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pytriton") is None, reason="nvidia-pytriton (its bundled tritonserver) is not installed"
)


def _grpc_stream(grpc_port: int, prompt: str, max_tokens: int) -> str:
    import queue

    import numpy as np
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    text = grpcclient.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
    limit = grpcclient.InferInput("max_tokens", [1], "INT32")
    limit.set_data_from_numpy(np.array([max_tokens], dtype=np.int32))
    client.async_stream_infer("ferrylm", [text, limit], enable_empty_final_response=True)
    pieces = []
    while True:
        result, error = results.get(timeout=120)
        assert error is None, error
        out = result.as_numpy("text_output")
        if out is not None:
            pieces += [x.decode() for x in out.reshape(-1)]
        if result.get_response().parameters["triton_final_response"].bool_param:
            break
    client.stop_stream()
    client.close()
    return "".join(pieces)


def _post_messages(url: str, raw: str):
    """A generate_stream request whose messages field is the given raw text."""
    from ferrylm.serve.client import _post, _sse

    with _post(f"{url}/v2/models/ferrylm/generate_stream", {"messages": raw, "max_tokens": 4}, 30, stream=True) as r:
        for chunk in _sse(r):
            if "error" in chunk:
                raise EndpointError(chunk["error"])
            yield chunk


def _answer(url: str, timeout: float = 30, **body) -> tuple[int, str]:
    """A POST's status and text. A response kept alive keeps its connection open, and tritonserver's
    stop waits for every open connection until its drain time is over."""
    r = requests.post(url, timeout=timeout, **body)
    return r.status_code, r.text


def _greedy(model, tokenizer, prompt: str, n: int) -> str:
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=n, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)


def _w4a16_artifact(tiny_qwen2_dir, out):
    """A W4A16 artifact of the tiny model, and the text the engine reading it generates in-process."""
    from ferrylm.engine import Engine
    from ferrylm.export.vllm_quant import write_compressed

    write_compressed(tiny_qwen2_dir, out, "w4a16", 32)
    assert is_w4a16(out) and not is_w4a16(tiny_qwen2_dir)  # how the eval's engine knows to read its integers
    tokenizer = load_tokenizer(tiny_qwen2_dir)
    tokenizer.save_pretrained(out)
    engine = Engine.from_pretrained(
        str(out),
        dtype=torch.float32,
        device="cpu",
        max_len=128,
        compile=False,
        tune=False,
        fused=True,
        w4a16_dir=str(out),
    )
    return lambda prompt, n: tokenizer.decode(
        list(engine.stream(tokenizer(prompt, add_special_tokens=False)["input_ids"], n, (tokenizer.eos_token_id,))),
        skip_special_tokens=True,
    )


@pytest.mark.slow
def test_triton_serves_the_exported_repository(tmp_path, tiny_qwen2_dir, capsys):
    repo = tmp_path / "triton_models"
    write_triton_repo(repo, "ferrylm", tiny_qwen2_dir, engine="fused", max_len=128)
    write_triton_repo(repo, "ferrylm-hf", tiny_qwen2_dir, engine="transformers")
    write_triton_repo(repo, "ferrylm-w4a16", tmp_path / "w4a16", engine="fused", max_len=128, w4a16=True)
    w4a16_greedy = _w4a16_artifact(tiny_qwen2_dir, tmp_path / "w4a16")
    port = free_port(count=3)
    server = TritonServer(repo, "ferrylm", "127.0.0.1", port, tmp_path / "triton.log", 300, 30, CACHE, max_queue=1)
    tokenizer, model = load_tokenizer(tiny_qwen2_dir), load_model(tiny_qwen2_dir).eval()
    with server:
        url = server.url
        started = capsys.readouterr().out  # the engine's start-up, phase by phase, as `ferrylm serve` shows it
        assert [line.split()[2] for line in started.splitlines() if line.startswith("ferrylm: engine")] == [
            "load",
            "convert",
            "capture",
        ]
        # A raw prompt, and a chat rendered by the model's own template: both equal local greedy decoding.
        prompt = "def add(a, b):\n"
        assert "".join(triton_stream(url, "ferrylm", 12, prompt=prompt)) == _greedy(model, tokenizer, prompt, 12)
        messages = [{"role": "user", "content": "Write a function that adds two numbers."}]
        rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert "".join(triton_stream(url, "ferrylm", 12, messages=messages)) == _greedy(model, tokenizer, rendered, 12)
        # gRPC streaming through tritonclient (port + 1): the same text.
        assert _grpc_stream(port + 1, prompt, 12) == _greedy(model, tokenizer, prompt, 12)
        # Malformed requests: an error each, and the server keeps serving.
        _, both = _answer(
            f"{url}/v2/models/ferrylm/generate_stream", json={"text_input": "x", "messages": "[]", "max_tokens": 4}
        )
        assert "exactly one of text_input" in both
        with pytest.raises(EndpointError, match="Expecting value"):  # messages that are not JSON
            list(_post_messages(url, "not json"))
        status, said = _answer(f"{url}/v2/models/ferrylm/generate_stream", data=b"{not json")
        # Triton's own HTTP front end answers a body that is not JSON with 500 (not 400) and a message.
        assert status >= 400 and "error" in said
        with pytest.raises(EndpointError, match="HTTP 4"):
            list(triton_stream(url, "no-such-model", 4, prompt="x"))
        assert requests.get(f"{url}/v2/models/ferrylm/ready", timeout=5).status_code == 200
        # Past the fused engine's max_len: an error naming it, and the server keeps serving.
        with pytest.raises(EndpointError, match="exceed the engine's max_len 128"):
            list(triton_stream(url, "ferrylm", 200, prompt=prompt))
        # The same repository's other engines, loaded through Triton's model-control API.
        for name in ("ferrylm-hf", "ferrylm-w4a16"):
            status, said = _answer(f"{url}/v2/repository/models/{name}/load", timeout=300)
            assert status == 200, said
        assert "".join(triton_stream(url, "ferrylm-hf", 12, prompt=prompt)) == _greedy(model, tokenizer, prompt, 12)
        assert "".join(triton_stream(url, "ferrylm-w4a16", 12, prompt=prompt)) == w4a16_greedy(prompt, 12)

        # Eight requests at once with one allowed to wait: each either streams its whole text or is refused at
        # once as busy with nothing generated; the server keeps serving, and a retry is answered.
        def ask(_):
            try:
                return "".join(triton_stream(url, "ferrylm", 100, prompt=prompt))
            except ServerBusy as e:
                return e

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(8)))
        busy = [a for a in answers if isinstance(a, ServerBusy)]
        assert busy and all("retry later" in str(a) for a in busy)
        assert [a for a in answers if not isinstance(a, ServerBusy)] == [_greedy(model, tokenizer, prompt, 100)] * (
            8 - len(busy)
        )
        assert "".join(triton_stream(url, "ferrylm", 12, prompt=prompt)) == _greedy(model, tokenizer, prompt, 12)
        # The eval's client asks a busy server again: eight at once through a queue of one, none lost.
        generator = TritonGenerator(url, "ferrylm")
        with ThreadPoolExecutor(8) as pool:
            texts = list(pool.map(lambda _: generator.complete(prompt, 100)[0], range(8)))
        assert texts == [_greedy(model, tokenizer, prompt, 100)] * 8
        # An occupied port: one line naming the key, nothing started.
        with pytest.raises(ServeError, match=f"serve.port: 127.0.0.1:{port} is already in use"):
            TritonServer(repo, "ferrylm", "127.0.0.1", port, tmp_path / "t2.log", 60, 5, CACHE).start()

        # SIGTERM with a 48-token stream in flight: Triton drains it before exiting.
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.extend(triton_stream(url, "ferrylm", 48, prompt=prompt)))
        reader.start()
        while not got:
            pass
        leader = server.proc.pid
        t = time.monotonic()
        server.stop()
        stopped_in = time.monotonic() - t
        reader.join(timeout=120)
    assert stopped_in < 30 + 10  # the drain (serve.drain_timeout_s=30 here) and 10 s
    assert "".join(got) == _greedy(model, tokenizer, prompt, 48)
    with pytest.raises(ProcessLookupError):
        import os

        os.killpg(leader, 0)  # nothing of the server's process group is left


def test_missing_repository_is_one_clear_error(tmp_path):
    server = TritonServer(
        tmp_path / "nope", "ferrylm", "127.0.0.1", free_port(count=3), tmp_path / "t.log", 60, 5, CACHE
    )
    with pytest.raises(ServeError, match="serve.triton_model: .* is not a Triton model"):
        server.start()
    assert server.proc is None
