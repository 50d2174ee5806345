"""A Llama-family decoder for batch-1 generation, built from a transformers model's weights.

At batch 1 each token reads every weight once through matrix-vector products, and each product is
one kernel with its own ramp-up and tail. transformers computes q, k, v and gate, up as five
separate products per layer; here q/k/v are one matrix and gate/up another, so a layer is four
products, each larger (better bandwidth per kernel). The KV cache is two preallocated tensors
written in place, which `torch.compile(mode="reduce-overhead")` captures in one CUDA graph.

Supports the layouts of Llama, Qwen2 and Mistral without sliding windows (SmolLM2 and
Qwen2.5 are among them); anything else is refused rather than computed differently. The linear
layers are plain `nn.Linear` modules, so weight-only quantized replacements (`quant.py`) slot in.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SUPPORTED = ("llama", "qwen2", "mistral")


class UnsupportedModel(ValueError):
    pass


def supports(config) -> bool:
    """Whether a transformers config is a layout this decoder computes exactly."""
    return config.model_type in SUPPORTED and not getattr(config, "use_sliding_window", False)


def _linear(weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.nn.Linear:
    layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device="meta")
    layer.weight = torch.nn.Parameter(weight, requires_grad=False)
    if bias is not None:
        layer.bias = torch.nn.Parameter(bias, requires_grad=False)
    return layer


def _cat(tensors: list[torch.Tensor | None]) -> torch.Tensor | None:
    if tensors[0] is None:
        return None
    return (
        tensors[0].detach() if len(tensors) == 1 else torch.cat([t.detach() for t in tensors])
    )  # one: shared, not copied


# Each fused matrix and the transformers projections it stacks by rows (also how quant.py reads a
# W4A16 artifact into the fused layers).
FUSED_FROM = {
    "wqkv": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "wo": ("self_attn.o_proj",),
    "w13": ("mlp.gate_proj", "mlp.up_proj"),
    "w2": ("mlp.down_proj",),
}


def layer_linears(decoder) -> list[tuple[torch.nn.Module, str]]:
    """(layer, name) of each fused matrix still held as an nn.Linear in the decoder's layers (not the
    output layer): where quantized or kernel-specific replacements go."""
    return [
        (layer, name)
        for layer in decoder.layers
        for name in FUSED_FROM
        if isinstance(getattr(layer, name), torch.nn.Linear)
    ]


class FusedLayer(torch.nn.Module):
    def __init__(self, hf_layer):
        super().__init__()
        for name, sources in FUSED_FROM.items():
            parts = [hf_layer.get_submodule(s) for s in sources]
            setattr(self, name, _linear(_cat([p.weight for p in parts]), _cat([p.bias for p in parts])))
        # Buffers, not plain attributes: compiled CUDA graphs treat buffers as fixed addresses
        # (a plain tensor attribute would be copied into the graph's inputs at every step).
        self.register_buffer("norm_in", hf_layer.input_layernorm.weight.detach(), persistent=False)
        self.register_buffer("norm_post", hf_layer.post_attention_layernorm.weight.detach(), persistent=False)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    # transformers' order of operations (normalise in fp32, cast back, then scale), so logits match.
    # No weight: it is folded into the next matrix (decode_step.fold_norms).
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return h.to(x.dtype) if weight is None else weight * h.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class FusedDecoder(torch.nn.Module):
    def __init__(self, hf_model, max_len: int):
        super().__init__()
        c = hf_model.config
        if not supports(c):
            raise UnsupportedModel(
                f"the fused decoder supports {', '.join(SUPPORTED)} without sliding windows, not {c.model_type}"
            )
        inner = hf_model.model
        self.n_heads, self.n_kv = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.max_len = max_len
        self.eps = c.rms_norm_eps
        self.register_buffer("embed", inner.embed_tokens.weight.detach(), persistent=False)
        self.layers = torch.nn.ModuleList(FusedLayer(layer) for layer in inner.layers)
        self.register_buffer("norm", inner.norm.weight.detach(), persistent=False)
        self.lm_head = _linear(hf_model.lm_head.weight.detach())
        self.register_buffer("inv_freq", inner.rotary_emb.inv_freq.detach().float(), persistent=False)
        self.rope_scale = float(inner.rotary_emb.attention_scaling)
        w = self.embed
        shape = (len(self.layers), 1, self.n_kv, max_len, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=w.dtype, device=w.device), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=w.dtype, device=w.device), persistent=False)
        for cache in (self.k_cache, self.v_cache):  # written in place inside the captured graph
            torch._dynamo.mark_static_address(cache)
        self.static_shapes = True  # the Engine sets False where it runs the decoder uncompiled
        # Set by gemv.gemv_weights(fused_step=True): one-token steps through decode_step.decode_step,
        # with the norms' weights folded into the matrices after them.
        self.one_token_step = None
        self.norm_weights_folded = False

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, None if self.norm_weights_folded else weight, self.eps)

    def forward(
        self, ids: torch.Tensor, pos: torch.Tensor, span: int | None = None, last: torch.Tensor | None = None
    ) -> torch.Tensor:
        """ids [1, T] at positions pos [T] (the cache holds every earlier position): logits [1, T, vocab];
        only at the positions `last` indexes where given (the prompt's last). `span`: the cache
        positions attention reads (the default reads pos[-1] from the GPU, which a CUDA graph cannot)."""
        if ids.shape[1] == 1 and self.one_token_step is not None:
            return self.one_token_step(self, ids, pos)
        T, H, KV, D = ids.shape[1], self.n_heads, self.n_kv, self.head_dim
        x = F.embedding(ids, self.embed)
        freqs = pos[:, None].float() * self.inv_freq[None]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = (emb.cos() * self.rope_scale).to(x.dtype), (emb.sin() * self.rope_scale).to(x.dtype)
        # Compiled into a CUDA graph, attention spans the whole static cache (masked); run eagerly
        # (on CPU), it spans only the positions filled so far, which is most of a CPU step's saving.
        if span is None:
            span = self.max_len if self.static_shapes else int(pos[-1]) + 1
        mask = torch.arange(span, device=ids.device)[None, :] <= pos[:, None]  # [T, span]
        for i, layer in enumerate(self.layers):
            h = self._norm(x, layer.norm_in)
            q, k, v = layer.wqkv(h).split([H * D, KV * D, KV * D], dim=-1)
            q = q.view(1, T, H, D).transpose(1, 2)
            k = k.view(1, T, KV, D).transpose(1, 2)
            v = v.view(1, T, KV, D).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            self.k_cache[i].index_copy_(2, pos, k)
            self.v_cache[i].index_copy_(2, pos, v)
            keys, values = self.k_cache[i][:, :, :span], self.v_cache[i][:, :, :span]
            att = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=KV != H)
            x = x + layer.wo(att.transpose(1, 2).reshape(1, T, H * D))
            h = self._norm(x, layer.norm_post)
            gate, up = layer.w13(h).chunk(2, dim=-1)
            x = x + layer.w2(F.silu(gate) * up)
        if last is not None:
            x = x.index_select(1, last)
        return self.lm_head(self._norm(x, self.norm))

    def reset(self) -> None:
        self.k_cache.zero_()
        self.v_cache.zero_()
