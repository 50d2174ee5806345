"""The text of a token stream, piece by piece, decoding a few tokens per step.

Copied beside the Triton model (`1/text_pieces.py`) by `ferrylm export`, so it imports nothing: the
ONNX engine's Triton environment has neither ferrylm nor torch.
"""


class TextPieces:
    """Incremental detokenization, the scheme of vLLM's and transformers' streamers: each token
    decodes only the tokens since the last complete piece plus the few before them (`context`: byte
    tokens and leading spaces decode differently alone), so a 512-token stream costs 512 small
    decodes instead of 512 decodes of everything so far. The pieces joined are the whole decode."""

    def __init__(self, tokenizer, context: int = 5):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.context = context
        self.start = 0  # where the next decode's context begins
        self.read = 0  # tokens whose text has been given out

    def add(self, token: int) -> str:
        """The text `token` completes ("" while a character is still partial)."""
        self.ids.append(token)
        decode = self.tokenizer.decode
        before = decode(self.ids[self.start : self.read], skip_special_tokens=True)
        now = decode(self.ids[self.start :], skip_special_tokens=True)
        if len(now) <= len(before) or now.endswith("\ufffd"):
            return ""
        self.start, self.read = max(self.read - self.context, self.start), len(self.ids)
        return now[len(before) :]
