"""The GPU engine's one-token step as few kernels as possible: four matrix-vector products and two
attention kernels per layer.

At one token per step a 7B layer is four weight reads of 26-271 MB, and everything between them
(RMS norms, rotary positions, cache writes, the attention mask, the SiLU gate, residual adds) is a
dozen kernels of a few microseconds each, most of it launch latency (a fifth of a step on an H200:
docs/performance.md). Here that work moves into the products' own prologues and epilogues
(`gemv.Epilogue`):

- the RMS norm before q/k/v, gate/up and the output layer: its weight is folded into the matrix's
  columns once (`fold_norms`), and the kernel, which reads all of x anyway, sums x's squares on the
  way and scales its dot products by 1/rms(x) at the end;
- rotary positions in the q/k/v kernel (each program owns rows d and d + head_dim/2 of a head), the
  SiLU gate in the gate/up kernel (rows i of gate and of up), residual adds after o and down;
- attention in two Triton kernels (flash decoding): one program per KV head and 64-position chunk
  scores its group of query heads, the chunk holding the new position also writes the new key and
  value into the cache, and a second kernel combines the chunks per head. The chunks past the
  current position return at once, so a step's attention costs what the filled cache costs.

All kernels use programmatic dependent launch (PDL) on Hopper like the products. The attention
kernels let their dependents launch at once, before waiting themselves, and read the cached keys and
values before waiting for the q/k/v product: the o product's programs are then already resident and
reading their first weights while attention runs, when the memory would otherwise be idle. The
attention kernel also has programs that read the start of the o product's words into the L2
meanwhile, so the o product finds them there: all of the 4-bit one (6.4 MB on a 7B layer), the first
eighth of the bf16 one (3.2 MB; more of its four times the bytes, or larger reads, measured slower).

What each part gained is measured in docs/performance.md. The prompt still runs through
`FusedDecoder.forward` (F.linear on the folded weights).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .fused import layer_linears
from .kernels.gemv import ROPE, SILU, Epilogue, supports_pdl
from .kernels.linear import GemvLinear

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU-only install: never called there
    triton = None

BLOCK_L = 64  # cache positions per attention program
# What attention's prefetching programs read for the o product after it (the module's docstring):
# (words a program reads in one load, the share of o's words from their start). Each engine's best
# measured on an H100 (docs/performance.md): for 4-bit, half the block was as fast in some runs and
# slower than none in others; for bf16, larger blocks and larger shares gained less or lost.
PREFETCH_INT4 = (16384, 1.0)
PREFETCH_BF16 = (1024, 0.125)


# `words` and `prefetch_block` are the step's two pieces a kernel study replaces (studies/decode_kernels/
# gemv_step_floor.py: which part of o is read ahead, and how): read from the module when the step is built.
def words(linear) -> torch.Tensor:
    """A product's weight as int32 words (the 4-bit one's packed words as they are)."""
    return linear.packed.view(-1) if hasattr(linear, "packed") else linear.weight.view(torch.int32).view(-1)


if triton is not None:

    @triton.jit
    def prefetch_block(ptr, n, sink_ptr, p, BLOCK: tl.constexpr):
        """Program p reads block p of the n words at ptr (nothing past them), kept in the L2 (evict_last)
        for the kernel after: an xor of them goes to sink_ptr[p] so the reads stay."""
        at = p * BLOCK + tl.arange(0, BLOCK)
        words = tl.load(ptr + at, mask=at < n, other=0, eviction_policy="evict_last")
        tl.store(sink_ptr + p, tl.xor_sum(words, axis=0))

    @triton.jit
    def _attend_chunk(
        qkv_ptr,
        k_ptr,
        v_ptr,
        pos_ptr,
        acc_ptr,
        m_ptr,
        l_ptr,
        pf_ptr,
        pf_n,
        sink_ptr,
        layer_offset,
        scale,
        H: tl.constexpr,
        KV: tl.constexpr,
        D: tl.constexpr,
        MAX_LEN: tl.constexpr,
        GROUP: tl.constexpr,
        BLOCK_G: tl.constexpr,
        BLOCK_L: tl.constexpr,
        CHUNKS: tl.constexpr,
        PF: tl.constexpr,
        PF_BLOCK: tl.constexpr,
        PDL: tl.constexpr,
    ):
        kv_head, chunk = tl.program_id(0), tl.program_id(1)
        if PDL:  # the combining kernel, then the o product, may launch now and start reading their weights
            tl.extra.cuda.gdc_launch_dependents()
        if PF > 0:
            if chunk >= CHUNKS:  # PF programs a KV head past the chunks: the next weights into the L2
                prefetch_block(pf_ptr, pf_n, sink_ptr, kv_head * PF + chunk - CHUNKS, PF_BLOCK)
        pos = tl.load(pos_ptr)  # written before this step (by the previous one), not by the q/k/v kernel
        if chunk * BLOCK_L <= pos and chunk < CHUNKS:
            d = tl.arange(0, D)
            g = tl.arange(0, BLOCK_G)
            at = chunk * BLOCK_L + tl.arange(0, BLOCK_L)
            filled = at <= pos
            # The cached keys and values (earlier steps') do not depend on the q/k/v kernel: read first.
            cache = layer_offset + kv_head * MAX_LEN * D + at[:, None] * D + d[None, :]
            k = tl.load(k_ptr + cache, mask=filled[:, None], other=0.0)
            v = tl.load(v_ptr + cache, mask=filled[:, None], other=0.0)
            if PDL:
                tl.extra.cuda.gdc_wait()
            q = tl.load(qkv_ptr + (kv_head * GROUP + g)[:, None] * D + d[None, :], mask=(g < GROUP)[:, None], other=0.0)
            # The new position's key and value come from this step's q/k/v vector; this chunk writes them.
            is_new = (at == pos)[:, None] & (d < D)[None, :]
            k = tl.where(is_new, tl.load(qkv_ptr + (H + kv_head) * D + d)[None, :], k)
            v = tl.where(is_new, tl.load(qkv_ptr + (H + KV + kv_head) * D + d)[None, :], v)
            tl.store(k_ptr + cache, k, mask=is_new)
            tl.store(v_ptr + cache, v, mask=is_new)
            scores = tl.dot(q, tl.trans(k)) * scale  # [BLOCK_G, BLOCK_L]
            scores = tl.where(filled[None, :], scores, float("-inf"))
            m = tl.max(scores, axis=1)
            p = tl.exp(scores - m[:, None])
            acc = tl.dot(p.to(v.dtype), v)  # [BLOCK_G, D]
            heads = kv_head * GROUP + g
            real = g < GROUP
            tl.store(acc_ptr + (heads[:, None] * CHUNKS + chunk) * D + d[None, :], acc, mask=real[:, None])
            tl.store(m_ptr + heads * CHUNKS + chunk, m, mask=real)
            tl.store(l_ptr + heads * CHUNKS + chunk, tl.sum(p, axis=1), mask=real)

    @triton.jit
    def _combine_chunks(
        acc_ptr,
        m_ptr,
        l_ptr,
        pos_ptr,
        out_ptr,
        CHUNKS: tl.constexpr,
        BLOCK_C: tl.constexpr,
        D: tl.constexpr,
        BLOCK_L: tl.constexpr,
        PDL: tl.constexpr,
    ):
        head = tl.program_id(0)
        if PDL:
            tl.extra.cuda.gdc_launch_dependents()
            tl.extra.cuda.gdc_wait()
        c = tl.arange(0, BLOCK_C)
        used = c <= tl.load(pos_ptr) // BLOCK_L
        m = tl.load(m_ptr + head * CHUNKS + c, mask=used, other=float("-inf"))
        weight = tl.exp(m - tl.max(m, axis=0))
        total = tl.sum(weight * tl.load(l_ptr + head * CHUNKS + c, mask=used, other=0.0), axis=0)
        d = tl.arange(0, D)
        acc = tl.load(acc_ptr + (head * CHUNKS + c)[:, None] * D + d[None, :], mask=used[:, None], other=0.0)
        tl.store(out_ptr + head * D + d, (tl.sum(weight[:, None] * acc, axis=0) / total).to(out_ptr.dtype.element_ty))


def attention(
    qkv: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    pos: torch.Tensor,
    layer: int,
    n_heads: int,
    pdl: bool = False,
    prefetch: torch.Tensor | None = None,
    prefetch_block: int = PREFETCH_INT4[0],
) -> torch.Tensor:
    """One token's attention in `layer` for its q/k/v vector (rotary positions applied) at position
    pos [1]: writes the new key and value into the caches [layers, 1, KV, max_len, D]; [H * D].
    With `prefetch` (int32 words: the next product's weights), more programs, one for each
    `prefetch_block` words, read them into the L2 meanwhile, when the memory would otherwise be idle."""
    _, _, kv, max_len, d = k_cache.shape
    group = n_heads // kv
    chunks = triton.cdiv(max_len, BLOCK_L)
    acc = torch.empty(n_heads, chunks, d, device=qkv.device, dtype=torch.float32)
    m, l_ = (torch.empty(n_heads, chunks, device=qkv.device, dtype=torch.float32) for _ in range(2))
    out = torch.empty(n_heads * d, device=qkv.device, dtype=qkv.dtype)
    launch = {"launch_pdl": True} if pdl else {}
    pf = triton.cdiv(triton.cdiv(prefetch.numel(), prefetch_block), kv) if prefetch is not None else 0  # a KV head
    sink = torch.empty(max(kv * pf, 1), device=qkv.device, dtype=torch.int32)
    _attend_chunk[(kv, chunks + pf)](
        qkv,
        k_cache,
        v_cache,
        pos,
        acc,
        m,
        l_,
        sink if prefetch is None else prefetch,
        0 if prefetch is None else prefetch.numel(),
        sink,
        layer * kv * max_len * d,
        d**-0.5,
        n_heads,
        kv,
        d,
        max_len,
        group,
        max(16, triton.next_power_of_2(group)),
        BLOCK_L,
        chunks,
        pf,
        prefetch_block,
        pdl,
        **launch,
    )
    _combine_chunks[(n_heads,)](acc, m, l_, pos, out, chunks, triton.next_power_of_2(chunks), d, BLOCK_L, pdl, **launch)
    return out


attention_op = torch.library.custom_op("ferrylm::decode_attention", attention, mutates_args=("k_cache", "v_cache"))


@attention_op.register_fake
def _(qkv, k_cache, v_cache, pos, layer, n_heads, pdl, prefetch, prefetch_block):
    return qkv.new_empty(n_heads * k_cache.shape[-1])


def fold_norms(decoder) -> None:
    """Fold each RMS norm's weight into the columns of the matrix it feeds (q/k/v, gate/up, the
    output layer): W (g * x) = (W diag g) x. The decoder's own norms then skip their weights."""

    def fold(owner, name, g):
        linear = getattr(owner, name)
        if hasattr(linear, "norm_weight"):  # 4-bit integers cannot take it: the kernel multiplies x instead
            linear.norm_weight = g
            return
        linear.weight = torch.nn.Parameter(
            (linear.weight.float() * g.float()).to(linear.weight.dtype), requires_grad=False
        )  # a new tensor: the model's stays as it was

    for layer in decoder.layers:
        fold(layer, "wqkv", layer.norm_in)
        fold(layer, "w13", layer.norm_post)
    fold(decoder, "lm_head", decoder.norm)
    decoder.norm_weights_folded = True


def epilogues(decoder) -> dict:
    """Each fused matrix's epilogue in `decode_step`."""
    eps, d = decoder.eps, decoder.head_dim
    return {
        "wqkv": Epilogue(eps, ROPE, d, (decoder.n_heads + decoder.n_kv) * d, decoder.rope_scale),
        "wo": Epilogue(residual=True),
        "w13": Epilogue(eps, SILU, decoder.layers[0].w13.out_features),
        "w2": Epilogue(residual=True),
        "lm_head": Epilogue(eps),
    }


def decode_step(dec, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """One token through a decoder prepared by `gemv.gemv_weights(fused_step=True)`: logits [1, 1, vocab]."""
    pdl, (block, share) = dec.lm_head.pdl, dec.attention_prefetch
    n = int(share * words(dec.layers[0].wo).numel()) if block else 0  # words of o read ahead
    x = F.embedding(ids, dec.embed).reshape(-1)
    for i, layer in enumerate(dec.layers):
        qkv = layer.wqkv.step(x, pos=pos, inv_freq=dec.inv_freq)
        att = attention_op(
            qkv,
            dec.k_cache,
            dec.v_cache,
            pos,
            i,
            dec.n_heads,
            pdl,
            words(layer.wo)[:n] if n else None,
            block or PREFETCH_INT4[0],
        )
        x = layer.wo.step(att, residual=x)
        x = layer.w2.step(layer.w13.step(x), residual=x)
    return dec.lm_head.step(x).view(1, 1, -1)


def gemv_weights(
    decoder: torch.nn.Module,
    pdl: bool | None = None,
    configs: dict | None = None,
    fused_step: bool = True,
    fixed: dict | None = None,
    budget=None,
) -> dict:
    """Put every linear layer of the fused decoder (and its output layer) on `gemv`, one tuned
    configuration per weight shape and epilogue (or `configs` {(n, k, epilogue): cfg}, or one `fixed`
    configuration for all); 4-bit layers (linear.Gemv4Linear) on `gemv4` likewise, keyed
    ("int4", n, k, group, epilogue). With `fused_step`, one-token steps run `decode_step` (norms,
    rotary positions, SiLU gate and residual adds inside the kernels). A shape met once `budget`
    (tuning.Budget) is spent takes its first candidate untimed. Returns the configurations used."""
    from .kernels.linear import Gemv4Linear
    from .tuning.choose import Budget, candidates, tune, tune4, tune4_candidates, untimed

    pdl = supports_pdl() if pdl is None else pdl
    configs = dict(configs or {})
    budget = budget or Budget()
    decoder.gemv_layers = {}  # key -> its layers, for `configure`
    if fused_step:
        fold_norms(decoder)
    kinds = epilogues(decoder) if fused_step else {}
    for owner, name in layer_linears(decoder) + [(decoder, "lm_head")]:
        linear = getattr(owner, name)
        epilogue = kinds.get(name, Epilogue())
        key = (*linear.weight.shape, epilogue)
        if key not in configs:
            configs[key] = fixed or (
                tune(linear.weight.detach(), pdl, epilogue)
                if budget.left()
                else untimed(candidates(*linear.weight.shape, epilogue))
            )
        setattr(owner, name, GemvLinear(linear, configs[key], pdl, epilogue))
        decoder.gemv_layers.setdefault(key, []).append(getattr(owner, name))
    for layer in decoder.layers:
        for name, child in layer.named_children():
            if isinstance(child, Gemv4Linear):
                epilogue = kinds.get(name, Epilogue())
                key = ("int4", child.out_features, child.in_features, child.group_size, epilogue)
                if key not in configs:
                    configs[key] = fixed or (
                        tune4(child, pdl, epilogue)
                        if budget.left()
                        else untimed(
                            tune4_candidates(child.out_features, child.in_features, child.group_size, epilogue)
                        )
                    )
                child.configure(configs[key], pdl, epilogue)
                decoder.gemv_layers.setdefault(key, []).append(child)
    if fused_step:
        # attention's reading the start of the o product's weights into the L2 ((0, 0): none)
        decoder.attention_prefetch = PREFETCH_INT4 if hasattr(decoder.layers[0].wo, "packed") else PREFETCH_BF16
        decoder.one_token_step = decode_step
    return configs


def configure(decoder: torch.nn.Module, key, cfg: dict) -> None:
    """Put configuration `cfg` on every layer `gemv_weights` keyed `key` (the engine's `_refine`)."""
    for layer in decoder.gemv_layers[key]:
        layer.configure(cfg, layer.pdl, layer.epilogue)
