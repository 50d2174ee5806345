"""The Triton model's streamed text (ferrylm/templates/text_pieces.py, copied beside it): the pieces
joined are the whole decode — multi-byte characters split across tokens, leading spaces, special
tokens — and each token decodes a few tokens, not everything so far."""

import random

from ferrylm.models import load_tokenizer
from ferrylm.templates.text_pieces import TextPieces

TEXT = (
    'def fib(n):\n    """The n-th Fibonacci number — 斐波那契 🦀."""\n    a, b = 0, 1\n'
    "    for _ in range(n):\n        a, b = b, a + b\n    return a  # ünïcödé\n<|im_end|>"
)


class Counting:
    def __init__(self, tokenizer):
        self.tokenizer, self.tokens_decoded = tokenizer, 0

    def decode(self, ids, **kw):
        self.tokens_decoded += len(ids)
        return self.tokenizer.decode(ids, **kw)


def test_pieces_join_to_the_whole_decode_with_a_few_tokens_per_step(smollm2_dir):
    tok = load_tokenizer(smollm2_dir)
    ids = tok(TEXT, add_special_tokens=False)["input_ids"]
    assert any("\ufffd" in tok.decode([i]) for i in ids)  # a character split across tokens
    counting = Counting(tok)
    text = TextPieces(counting)
    pieces = [text.add(i) for i in ids]
    assert "".join(pieces) == tok.decode(ids, skip_special_tokens=True)
    assert "" in pieces and not any("\ufffd" in p for p in pieces)
    # Two decodes of at most context + 2 tokens per step (quadratic would be ~len(ids) / 2 per step).
    assert counting.tokens_decoded <= 2 * (5 + 2) * len(ids) < len(ids) * len(ids) / 2

    rng = random.Random(0)  # arbitrary ids, byte tokens among them
    ids = [rng.randrange(tok.vocab_size) for _ in range(300)]
    text = TextPieces(tok)
    joined = "".join(text.add(i) for i in ids)
    whole = tok.decode(ids, skip_special_tokens=True)
    assert joined == whole.rstrip("\ufffd") and len(whole) - len(joined) < 4
