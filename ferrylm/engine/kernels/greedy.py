"""The kernel engine's greedy choice and its loop's bookkeeping in one kernel.

After the output layer, a captured step took the argmax of the logits and then moved the loop's state
along (the token, its slot in the tokens so far, the position): five small kernels of torch's, each
waiting for the one before. `Greedy.advance` does all of it in one launch: programs of BLOCK logits
each find their block's largest (its first index, as torch.argmax), and the last program to finish
(an atomic count, reset for the next step) takes the first largest over the blocks in order and
writes the state. The result is torch.argmax's on the same logits.
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU-only install: the kernel engine is never built there
    triton = None

BLOCK = 4096  # logits a program


if triton is not None:

    @triton.jit
    def _greedy_kernel(
        logits_ptr,
        best_ptr,
        at_ptr,
        count_ptr,
        token_ptr,
        tokens_ptr,
        pos_ptr,
        V: tl.constexpr,
        BLOCK: tl.constexpr,
        PARTS: tl.constexpr,
        PARTS_P2: tl.constexpr,
        PDL: tl.constexpr,
    ):
        pid = tl.program_id(0)
        if PDL:
            tl.extra.cuda.gdc_wait()  # the output layer has written the logits
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(logits_ptr + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
        top = tl.max(v, axis=0)
        tl.store(best_ptr + pid, top)
        tl.store(at_ptr + pid, tl.min(tl.where(v == top, offs, V), axis=0))
        tl.debug_barrier()  # this program's part stored before its count says so (release, GPU scope)
        if tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu") == PARTS - 1:
            parts = tl.arange(0, PARTS_P2)
            inside = parts < PARTS
            best = tl.load(best_ptr + parts, mask=inside, other=float("-inf"), volatile=True)
            at = tl.load(at_ptr + parts, mask=inside, other=V, volatile=True)
            token = tl.min(tl.where(best == tl.max(best, axis=0), at, V), axis=0).to(tl.int64)
            token = tl.minimum(token, V - 1)  # all NaN (a broken model): a token, not a read past the embedding
            pos = tl.load(pos_ptr)
            tl.store(token_ptr, token)
            tl.store(tokens_ptr + pos + 1, token)
            tl.store(pos_ptr, pos + 1)
            tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")  # for the next step


class Greedy:
    """The kernel with its scratch (the blocks' largest, their indices, the count) for logits of
    `vocab` values on `device`."""

    def __init__(self, vocab: int, device: torch.device, pdl: bool):
        self.vocab, self.pdl = vocab, pdl
        self.parts = -(-vocab // BLOCK)
        self.best = torch.empty(self.parts, device=device, dtype=torch.float32)
        self.at = torch.empty(self.parts, device=device, dtype=torch.int32)
        self.count = torch.zeros(1, device=device, dtype=torch.int32)

    def advance(self, logits: torch.Tensor, token: torch.Tensor, tokens: torch.Tensor, pos: torch.Tensor) -> None:
        """token [1, 1] <- argmax(logits [vocab]); tokens[pos + 1] <- it; pos += 1 (int64 buffers)."""
        if logits.numel() != self.vocab:
            raise ValueError(f"greedy: {logits.numel()} logits for a vocabulary of {self.vocab}")
        launch = {"launch_pdl": True} if self.pdl else {}
        _greedy_kernel[(self.parts,)](
            logits,
            self.best,
            self.at,
            self.count,
            token,
            tokens,
            pos,
            self.vocab,
            BLOCK,
            self.parts,
            triton.next_power_of_2(self.parts),
            self.pdl,
            num_warps=8,
            **launch,
        )
