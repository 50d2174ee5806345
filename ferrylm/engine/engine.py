"""A batch-1 generation engine for GPUs: static KV cache and a compiled, CUDA-graph-captured decode step.

Decoding one token of a 7B model reads every weight once; at batch 1 the time goes to kernel
launches and Python unless the step is captured. `Engine` prefills eagerly, then runs a decode
step compiled with `mode="reduce-overhead"` (CUDA graphs) over a preallocated `StaticCache`,
with the greedy choice inside the graph, so a token costs one graph replay. The loop's state (the
latest token, its position, the tokens so far) is in fixed buffers that the captured step reads and
advances, so nothing runs between replays (docs/performance.md has what each step gained). The kernel
engine (`gemv=True`), whose step is Triton kernels already, captures that step into a CUDA graph by hand
instead of compiling it. On CPU it runs the same loop uncompiled (tests check it gives `generate()`'s
tokens).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch

from .options import EngineOptions


class Engine:
    """Its modes are an `EngineOptions` (engine/options.py, validated once), or that object's fields
    given as keywords. `fused=True` runs `FusedDecoder` (q/k/v and gate/up fused, Llama-family models)
    instead of the transformers model; `int4_group` then makes its linear layers 4-bit (round to nearest) and
    `w4a16_dir` gives them the export stage's W4A16 artifact's own integers and scales; `gemv=True`
    (CUDA, bf16) puts its linear layers on the Triton matrix-vector kernel of `gemv.py` instead and
    runs each one-token step through `decode_step.py` (norms, rotary positions, SiLU gate, residual adds
    and attention inside Triton kernels); with `int4_group` or `w4a16_dir` too, the 4-bit layers run on
    the 4-bit kernel of `gemv4.py` instead of torch's int4 kernel (their prompts on `gemv4.prompt4`).
    The kernels are tuned per shape, then the tuner's runners-up are tried in the captured step
    (`_refine`); `gemv_fixed` (block_n, block_k, num_warps, num_stages) skips both. What the captured
    engine chose is saved (`tuned.py`: in ferrylm's cache, or the folder `tuned_dir`; False: neither
    read nor saved), and the next engine on the same GPU and code takes it instead of tuning again; choices
    shipped for the GPU (`tuned.shipped`) come first, and `tune_budget_s` bounds what tuning is left. The
    start-up is timed by phase (`phases`: load, convert, tune, refine, capture; `progress` hears each).
    `prefill_bucket` (the captured kernel engine's default: 64) pads a prompt to a multiple of it, so
    prompts of one bucket share a prefill captured in a CUDA graph (padding after the prompt is never
    attended to: each later step overwrites its own position first); elsewhere, given, it pads only."""

    def __init__(self, model, max_len: int = 2048, options: EngineOptions | None = None, progress=None, **switches):
        """`options` (engine/options.py), or its fields as keywords: `Engine(model, fused=True)`."""
        from transformers import StaticCache

        if options is not None and switches:
            raise ValueError(f"Engine: give options or its fields ({', '.join(sorted(switches))}), not both")
        o = self.options = options or EngineOptions(**switches)
        import torch._inductor.config as inductor

        # tune: let inductor generate the batch-1 matrix-vector kernels itself (and fuse an FP8
        # weight's cast into them) instead of calling a general GEMM: gpt-fast's setting. Set both
        # ways: the setting is global and a later engine must not inherit an earlier one's.
        inductor.coordinate_descent_tuning = o.tune
        inductor.triton.unique_kernel_names = o.tune
        self.model = model.eval()
        self.device = next(model.parameters()).device
        # start-up phase -> seconds (`_phase`); `progress(phase, seconds)` is called as each one ends
        self.phases, self.progress, self.max_len = {}, progress, max_len
        if o.gemv and self.device.type != "cuda":
            raise ValueError("Engine(gemv=True): the Triton matrix-vector kernel runs on CUDA GPUs only")
        self.decoder = None
        compile = o.compiled(self.device.type)
        if o.fused_decoder:
            # Only a captured kernel engine's choice is kept: it alone is refined in its step.
            self.decoder = self._fused_decoder(max_len, o, o.tuned_dir if compile else False)
            self.decoder.static_shapes = compile and not o.gemv  # only a compiled forward needs them
        else:
            self.cache = StaticCache(config=model.config, max_cache_len=max_len)
        self._decode_state(max_len)
        self.prefill_bucket = o.prefill_bucket or (64 if compile and o.gemv else None)
        self._choose_step(compile, o.gemv)

    def _decode_state(self, max_len: int) -> None:
        # The decode loop's state lives in fixed buffers that the captured step reads and advances
        # itself, so a token costs one graph replay with no copies or small kernels around it.
        self._token = torch.zeros(1, 1, dtype=torch.long, device=self.device)  # the latest token
        self._pos = torch.zeros(1, dtype=torch.long, device=self.device)  # its position
        self._tokens = torch.zeros(max_len + 1, dtype=torch.long, device=self.device)  # every token, by position
        for buf in (self._token, self._pos, self._tokens):
            torch._dynamo.mark_static_address(buf)
        self._graph = None
        self._prefills: dict = {}  # bucket -> (graph, its ids, its last position): `_prefill_padded`
        self._greedy = None

    def _choose_step(self, compile: bool, gemv: bool) -> None:
        if compile and gemv:
            # The step is already its own Triton kernels: captured by hand (`_replay`), not compiled;
            # its greedy choice and the loop's state move in one more kernel (`greedy.py`).
            from .kernels.greedy import Greedy

            head = self.decoder.lm_head
            self._greedy = Greedy(head.weight.shape[0], self.device, head.pdl)
            self._step = self._replay
            self._refine()
            if self._tuned is not None and self.tuned_keys:
                from .tuning.cache import save

                save(self._tuned, self.gemv_configs)
        elif compile:
            self._step = torch.compile(self._advance, mode="reduce-overhead", fullgraph=True)
        else:
            self._step = self._advance

    def _fused_decoder(self, max_len, o: EngineOptions, tuned_dir):
        from .fused import FusedDecoder
        from .kernels.int4 import int4_from_w4a16, int4_weights

        start = time.perf_counter()
        decoder = FusedDecoder(self.model, max_len)
        make = None
        if o.gemv:
            from .kernels.linear import Gemv4Linear as make
        if o.w4a16_dir:
            int4_from_w4a16(decoder, o.w4a16_dir, make)
        elif o.int4_group:
            int4_weights(decoder, o.int4_group, make)
        self._phase("convert", start)
        if o.gemv:
            from .decode_step import gemv_weights
            from .kernels.gemv import supports_pdl
            from .tuning.cache import load, shipped, tuned_path
            from .tuning.choose import Budget

            start = time.perf_counter()
            self._tuned = None if o.gemv_fixed or tuned_dir is False else tuned_path(supports_pdl(), tuned_dir or None)
            # This machine's own choices over the ones shipped for its GPU (tuned on the same kind of card).
            saved = {**shipped(), **load(self._tuned)} if self._tuned is not None else {}
            self.budget = Budget(o.tune_budget_s)
            configs = gemv_weights(decoder, configs=saved, fixed=o.gemv_fixed, budget=self.budget)
            self._phase("tune", start)
            self.gemv_configs = {key: cfg for key, cfg in configs.items() if key in decoder.gemv_layers}
            self.tuned_keys = [key for key in self.gemv_configs if key not in saved]  # the others were saved
        return decoder

    def _phase(self, name: str, start: float) -> None:
        self.phases[name] = time.perf_counter() - start
        if self.progress is not None:
            self.progress(name, self.phases[name])

    @classmethod
    def from_pretrained(cls, model_dir: str, dtype=torch.bfloat16, device: str | None = None, **kw) -> Engine:
        """The engine on `model_dir`'s weights; its "load" phase is reading them onto the device."""
        from transformers import AutoModelForCausalLM

        from ..models import dense_weights

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        start = time.perf_counter()
        # a compressed-tensors artifact (the export's W4A16 one) is read with dense weights: the decoder is
        # built from them, then takes the artifact's own integers (w4a16_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, **dense_weights(model_dir)).to(device)
        load_s = time.perf_counter() - start
        if kw.get("progress") is not None:
            kw["progress"]("load", load_s)
        engine = cls(model, **kw)
        engine.phases = {"load": load_s, **engine.phases}
        return engine

    def _decode(self, token: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        if self.decoder is not None:
            return self.decoder(token, position)[:, -1].argmax(-1, keepdim=True)
        out = self.model(
            input_ids=token,
            position_ids=position.unsqueeze(0),
            cache_position=position,
            past_key_values=self.cache,
            use_cache=True,
        )
        return out.logits[:, -1].argmax(-1, keepdim=True)

    def _advance(self) -> None:
        """One decode step on the engine's state: the next token after _token (at _pos) goes into _token
        and _tokens[_pos + 1], and _pos moves on."""
        if self._greedy is not None:
            self._greedy.advance(self.decoder(self._token, self._pos).view(-1), self._token, self._tokens, self._pos)
            return
        nxt = self._decode(self._token, self._pos)
        self._token.copy_(nxt)
        self._tokens.index_copy_(0, self._pos + 1, nxt.view(1))
        self._pos.add_(1)

    def _replay(self) -> None:
        """The kernel engine's step (`gemv=True`): its first call runs `_advance` eagerly (compiling the
        kernels) and captures the next into a CUDA graph, which every later call replays. Inductor would
        only wrap kernels it cannot fuse, and its compile of the 4-bit step did not finish in 500 s
        (docs/performance.md); the captured graph reads the same fixed buffers and caches for every prompt."""
        if self._graph is not None:
            self._graph.replay()
            return
        self._advance()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # waits for the eager step; recorded, not run: the state is that step's
            self._advance()
        self._graph = graph

    @torch.no_grad()
    def _refine(self, steps: int = 16, repeats: int = 3) -> None:
        """The tuner's runners-up tried in the captured step itself (`tuning.refine`): each kernel was
        chosen alone, and the step overlaps its kernels. A short prompt's state is stepped `steps`
        times a timing, from the same position each time; the cache it leaves is reset by the next
        prompt, and the graph is captured again at the first real step."""
        from .decode_step import configure
        from .tuning.choose import refine

        prompt = list(range(8))
        self.refine_log = []
        if (
            self.max_len < len(prompt) + steps + 2
            or not self.budget.left()
            or not any(c.get("runners_up") for c in self.gemv_configs.values())
        ):
            return
        begin = time.perf_counter()
        self.prefill(prompt, steps + 1)
        start = self.position()

        def apply(key, cfg):
            configure(self.decoder, key, cfg)
            self.recapture()

        def time_step() -> float:
            self.capture_at(start)
            return self.step_ms(start, steps, repeats)

        self.gemv_configs = refine(self.gemv_configs, apply, time_step, log=self.refine_log, budget=self.budget)
        self.recapture()
        self._phase("refine", begin)

    # How `_refine` and the kernel studies (studies/decode_kernels/) time the captured step: prefill a prompt,
    # keep its position, change a kernel or its configuration, recapture, time from that position.
    def position(self) -> torch.Tensor:
        """A copy of the decode position (the next step writes the token after it)."""
        return self._pos.clone()

    def recapture(self) -> None:
        """Drop the captured step: the next one runs eagerly and is captured again."""
        self._graph = None

    def capture_at(self, start: torch.Tensor) -> None:
        """The step captured again from position `start`, when it was dropped (`gemv=True`, CUDA)."""
        if self._graph is None:
            self._pos.copy_(start)
            self._replay()  # the eager step, then the capture

    def captured(self) -> dict:
        """Whether the step and a prompt's prefill are captured in CUDA graphs now."""
        return {"step": self._graph is not None, "prefill": bool(self._prefills)}

    def run_eagerly(self) -> None:
        """From now on every step and prefill runs eagerly, the greedy choice by torch's argmax: the reference
        the captured graphs are checked against (benchmarks/gpu_decode.py)."""
        self._prefills.clear()
        self._greedy = None
        self._graph = None
        self._step = self._advance

    @property
    def tuned_file(self):
        """Where this engine keeps the kernel configurations it tuned (None: not kept, or no kernel step)."""
        return getattr(self, "_tuned", None)

    def step_ms(self, start: torch.Tensor, steps: int = 16, repeats: int = 3) -> float:
        """The captured step's time (ms), stepped `steps` times from position `start` a timing, best of
        `repeats` after one to warm up (the graph already captured)."""
        times = []
        for _ in range(repeats + 1):
            self._pos.copy_(start)
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(steps):
                self._graph.replay()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / steps)
        return min(times[1:])

    def prefill(self, prompt_ids: list[int], new_tokens: int) -> torch.Tensor:
        """Reset the cache and run the prompt (eagerly: its length varies); the first greedy token."""
        n = len(prompt_ids)
        if n + new_tokens > self.max_len:
            raise ValueError(f"prompt {n} + {new_tokens} new tokens exceed the engine's max_len {self.max_len}")
        bucket = -(-n // self.prefill_bucket) * self.prefill_bucket if self.prefill_bucket else None
        if bucket is not None and self.decoder is not None and bucket <= self.max_len:
            return self._prefill_padded(prompt_ids, bucket)
        self.decoder.reset() if self.decoder is not None else self.cache.reset()
        token = self._decode(torch.tensor([prompt_ids], device=self.device), torch.arange(n, device=self.device))
        self._token.copy_(token)
        self._pos.fill_(n)
        return token

    # Prompt buckets whose prefill graphs are kept (each holds its activations' memory).
    PREFILL_GRAPHS = 8

    def _prefill_padded(self, prompt_ids: list[int], bucket: int) -> torch.Tensor:
        """`prefill` of the prompt padded to `bucket` tokens, the first token from its last real
        position. The kernel engine captures it per bucket the first time (run eagerly, then recorded)
        and replays it after, so the prompt's few hundred kernels cost no Python launches."""
        n = len(prompt_ids)
        ids, last = torch.tensor([prompt_ids + [0] * (bucket - n)]), torch.tensor([n - 1])  # on the host
        captured = self._prefills.get(bucket)
        if captured is not None:  # one upload each, into the graph's own inputs
            graph, static_ids, static_last = captured
            static_ids.copy_(ids)
            static_last.copy_(last)
            graph.replay()
            return self._token.clone()  # the steps overwrite _token
        ids, last = ids.to(self.device), last.to(self.device)
        self._prefill_into(ids, last, bucket)
        if self._step == self._replay:
            if len(self._prefills) >= self.PREFILL_GRAPHS:
                self._prefills.pop(next(iter(self._prefills)))  # the oldest bucket
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):  # recorded, not run: the state is the eager prefill's
                self._prefill_into(ids, last, bucket)
            self._prefills[bucket] = (graph, ids, last)
        return self._token.clone()

    def _prefill_into(self, ids: torch.Tensor, last: torch.Tensor, bucket: int) -> None:
        """The padded prefill on the engine's state, with nothing read back to the host (capturable)."""
        self.decoder.reset()
        logits = self.decoder(ids, torch.arange(bucket, device=self.device), span=bucket, last=last)
        self._token.copy_(logits[:, -1].argmax(-1, keepdim=True))
        self._pos.copy_(last + 1)

    # Steps queued on the GPU ahead of the token being read: the host's work on a token (decoding its text,
    # sending it) then overlaps the next steps instead of leaving the GPU idle between them.
    STREAM_AHEAD = 4

    @torch.no_grad()
    def stream(self, prompt_ids: list[int], max_new_tokens: int, eos_ids: tuple[int, ...] = ()) -> Iterator[int]:
        """Greedy tokens one by one; stops after an EOS id (yielded) or max_new_tokens. Up to STREAM_AHEAD
        steps run ahead of the token yielded (after an EOS they are discarded: the next prompt resets
        the cache), so the GPU never waits for the consumer."""
        tok = int(self.prefill(prompt_ids, max_new_tokens))
        yield tok
        if tok in eos_ids or max_new_tokens == 1:
            return
        reader = _TokenReader(self._tokens, len(prompt_ids), max_new_tokens)
        for i in range(1, max_new_tokens):
            while reader.queued < min(i + self.STREAM_AHEAD, max_new_tokens - 1):
                self._step()
                reader.queue()
            tok = reader.read(i)
            yield tok
            if tok in eos_ids:
                return

    def warm_up(self, prompt_ids: list[int]) -> None:
        """Run the first request's paths (capturing the kernel engine's step and this prompt's prefill),
        so that a server answers its first request at full speed; timed as the "capture" phase."""
        start = time.perf_counter()
        list(self.stream(prompt_ids, 2))
        self._phase("capture", start)

    @torch.no_grad()
    def generate_timed(self, prompt_ids: list[int], new_tokens: int) -> dict:
        """Exactly `new_tokens` greedy tokens with no per-token host sync; time to first token and total."""
        sync = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        sync()
        t0 = time.perf_counter()
        token = self.prefill(prompt_ids, new_tokens)
        sync()
        ttft = time.perf_counter() - t0
        for _ in range(new_tokens - 1):
            self._step()
        n = len(prompt_ids)
        tokens = [int(token)] + self._tokens[n + 1 : n + new_tokens].tolist()  # (a sync)
        total = time.perf_counter() - t0
        return {"ttft_s": ttft, "total_s": total, "tokens": tokens}


class _TokenReader:
    """The new tokens of a stream read back while later steps run: each step's token (at its position in
    the engine's `tokens` buffer) is copied to pinned host memory behind the step and read once its
    event has passed. On a CPU the copy is the read."""

    def __init__(self, tokens: torch.Tensor, prompt_len: int, max_new_tokens: int):
        self.tokens, self.first = tokens, prompt_len  # the i-th new token (i >= 1) is at prompt_len + i
        self.cuda = tokens.device.type == "cuda"
        self.host = torch.empty(max_new_tokens, dtype=torch.long, pin_memory=self.cuda)
        self.events: dict[int, torch.cuda.Event] = {}
        self.queued = 0  # steps launched

    def queue(self) -> None:
        self.queued += 1
        i = self.queued
        self.host[i : i + 1].copy_(self.tokens[self.first + i : self.first + i + 1], non_blocking=self.cuda)
        if self.cuda:
            self.events[i] = torch.cuda.Event()
            self.events[i].record()

    def read(self, i: int) -> int:
        if self.cuda:
            self.events.pop(i).synchronize()
        return int(self.host[i])
