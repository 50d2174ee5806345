"""The GPU engine's one-token step as few kernels as possible: five matrix-vector products and two
attention kernels per layer.

At one token per step a 7B layer is four weight reads of 26-271 MB, and everything between them
(RMS norms, rotary positions, cache writes, the attention mask, the SiLU gate, residual adds) is a
dozen kernels of a few microseconds each, most of it launch latency: 0.8 ms of a 4.2 ms step on an
H200 (docs/benchmarks.md). Here that work moves into the products' own prologues and epilogues
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

All kernels use programmatic dependent launch on Hopper like the products. The prompt still runs
through `FusedDecoder.forward` (F.linear on the folded weights).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .gemv import ROPE, SILU, Epilogue

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU-only install: never called there
    triton = None

BLOCK_L = 64   # cache positions per attention program

if triton is not None:
    @triton.jit
    def _attend(qkv_ptr, k_ptr, v_ptr, pos_ptr, acc_ptr, m_ptr, l_ptr, count_ptr, out_ptr, layer, scale,
                H: tl.constexpr, KV: tl.constexpr, D: tl.constexpr, MAX_LEN: tl.constexpr, BLOCK_L: tl.constexpr,
                CHUNKS: tl.constexpr, BLOCK_C: tl.constexpr, PDL: tl.constexpr):
        head, chunk = tl.program_id(0), tl.program_id(1)
        kv_head = head // (H // KV)
        if PDL:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()
        pos = tl.load(pos_ptr)
        if chunk * BLOCK_L <= pos:
            d = tl.arange(0, D)
            at = chunk * BLOCK_L + tl.arange(0, BLOCK_L)
            filled = at <= pos
            cache = (layer * KV + kv_head) * MAX_LEN * D + at[:, None] * D + d[None, :]
            k = tl.load(k_ptr + cache, mask=filled[:, None], other=0.0)
            v = tl.load(v_ptr + cache, mask=filled[:, None], other=0.0)
            # The new position's key and value come from this step's q/k/v vector; the chunk holding it
            # writes them into the cache (once per KV head: its group's first query head).
            is_new = (at == pos)[:, None] & (d < D)[None, :]
            k = tl.where(is_new, tl.load(qkv_ptr + (H + kv_head) * D + d)[None, :], k)
            v = tl.where(is_new, tl.load(qkv_ptr + (H + KV + kv_head) * D + d)[None, :], v)
            writes = is_new & (tl.zeros_like(at) + head % (H // KV) == 0)[:, None]
            tl.store(k_ptr + cache, k, mask=writes)
            tl.store(v_ptr + cache, v, mask=writes)
            q = tl.load(qkv_ptr + head * D + d).to(tl.float32)
            scores = tl.sum(k.to(tl.float32) * q[None, :], axis=1) * scale
            scores = tl.where(filled, scores, float("-inf"))
            m = tl.max(scores, axis=0)
            p = tl.exp(scores - m)
            tl.store(acc_ptr + (head * CHUNKS + chunk) * D + d, tl.sum(p[:, None] * v.to(tl.float32), axis=0))
            tl.store(m_ptr + head * CHUNKS + chunk, m)
            tl.store(l_ptr + head * CHUNKS + chunk, tl.sum(p, axis=0))
            # The head's last chunk to finish (an acq_rel counter: the other chunks' results are
            # visible to it) combines them, and resets the counter for the next step.
            used = pos // BLOCK_L + 1
            if tl.atomic_add(count_ptr + layer * H + head, 1) == used - 1:
                tl.atomic_xchg(count_ptr + layer * H + head, 0)
                c = tl.arange(0, BLOCK_C)
                valid = c < used
                ms = tl.load(m_ptr + head * CHUNKS + c, mask=valid, other=float("-inf"), cache_modifier=".cg")
                ls = tl.load(l_ptr + head * CHUNKS + c, mask=valid, other=0.0, cache_modifier=".cg")
                accs = tl.load(acc_ptr + (head * CHUNKS + c)[:, None] * D + d[None, :], mask=valid[:, None],
                               other=0.0, cache_modifier=".cg")
                weight = tl.exp(ms - tl.max(ms, axis=0))
                out = tl.sum(weight[:, None] * accs, axis=0) / tl.sum(weight * ls, axis=0)
                tl.store(out_ptr + head * D + d, out.to(out_ptr.dtype.element_ty))


def attention(qkv: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, counters: torch.Tensor,
              pos: torch.Tensor, layer: int, n_heads: int, pdl: bool = False) -> torch.Tensor:
    """One token's attention in `layer` for its q/k/v vector (rotary positions applied) at position
    pos [1]: writes the new key and value into the caches [layers, 1, KV, max_len, D]; [H * D].
    `counters` [layers, H] (int32, zero) count finished chunks; the kernel leaves them at zero."""
    _, _, kv, max_len, d = k_cache.shape
    chunks = triton.cdiv(max_len, BLOCK_L)
    acc = torch.empty(n_heads, chunks, d, device=qkv.device, dtype=torch.float32)
    m, l_ = (torch.empty(n_heads, chunks, device=qkv.device, dtype=torch.float32) for _ in range(2))
    out = torch.empty(n_heads * d, device=qkv.device, dtype=qkv.dtype)
    launch = {"launch_pdl": True} if pdl else {}
    _attend[(n_heads, chunks)](qkv, k_cache, v_cache, pos, acc, m, l_, counters, out, layer, d ** -0.5, n_heads, kv,
                               d, max_len, BLOCK_L, chunks, triton.next_power_of_2(chunks), pdl, **launch)
    return out


@torch.library.custom_op("ferrylm::decode_attention", mutates_args=("k_cache", "v_cache", "counters"))
def attention_op(qkv: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, counters: torch.Tensor,
                 pos: torch.Tensor, layer: int, n_heads: int, pdl: bool) -> torch.Tensor:
    return attention(qkv, k_cache, v_cache, counters, pos, layer, n_heads, pdl)


@attention_op.register_fake
def _(qkv, k_cache, v_cache, counters, pos, layer, n_heads, pdl):
    return qkv.new_empty(n_heads * k_cache.shape[-1])


def fold_norms(decoder) -> None:
    """Fold each RMS norm's weight into the columns of the matrix it feeds (q/k/v, gate/up, the
    output layer): W (g * x) = (W diag g) x. The decoder's own norms then skip their weights."""
    def fold(owner, name, g):
        linear = getattr(owner, name)
        linear.weight = torch.nn.Parameter((linear.weight.float() * g.float()).to(linear.weight.dtype),
                                           requires_grad=False)   # a new tensor: the model's stays as it was
    for layer in decoder.layers:
        fold(layer, "wqkv", layer.norm_in)
        fold(layer, "w13", layer.norm_post)
    fold(decoder, "lm_head", decoder.norm)
    decoder.norm_weights_folded = True


def epilogues(decoder) -> dict:
    """Each fused matrix's epilogue in `decode_step`."""
    eps, d = decoder.eps, decoder.head_dim
    return {"wqkv": Epilogue(eps, ROPE, d, (decoder.n_heads + decoder.n_kv) * d, decoder.rope_scale),
            "wo": Epilogue(residual=True), "w13": Epilogue(eps, SILU, decoder.layers[0].w13.weight.shape[0]),
            "w2": Epilogue(residual=True), "lm_head": Epilogue(eps)}


def decode_step(dec, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """One token through a decoder prepared by `gemv.gemv_weights(fused_step=True)`: logits [1, 1, vocab]."""
    pdl = dec.lm_head.pdl
    x = F.embedding(ids, dec.embed).reshape(-1)
    for i, layer in enumerate(dec.layers):
        qkv = layer.wqkv.step(x, pos=pos, inv_freq=dec.inv_freq)
        att = attention_op(qkv, dec.k_cache, dec.v_cache, dec.attention_counters, pos, i, dec.n_heads, pdl)
        x = layer.wo.step(att, residual=x)
        x = layer.w2.step(layer.w13.step(x), residual=x)
    return dec.lm_head.step(x).view(1, 1, -1)

