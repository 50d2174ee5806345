"""The kernel engine's greedy step (`greedy.py`) chooses torch.argmax's token and moves the loop's
state, through Triton's interpreter (the GPU's run is checked against torch's argmax in benchmarks/gpu_decode.py)."""

from .test_gemv import _interpret

CHECK = r"""
import torch
from ferrylm.engine.kernels.greedy import BLOCK, Greedy
print("CHECK each block's first largest, then the blocks' in order, and the state moved", flush=True)
torch.manual_seed(0)
for vocab in (100, BLOCK, 3 * BLOCK + 5):
    for dtype in (torch.float32, torch.bfloat16):
        greedy = Greedy(vocab, torch.device("cpu"), pdl=False)
        tokens, pos, token = torch.zeros(20, dtype=torch.long), torch.tensor([4]), torch.zeros(1, 1, dtype=torch.long)
        for step in range(3):
            logits = torch.randn(vocab).to(dtype)
            if step == 1:   # ties within a block and across blocks: the first index, as torch.argmax
                logits[vocab - 1] = logits[vocab // 2] = logits[3] = logits.max() + 1
            greedy.advance(logits, token, tokens, pos)
            want = int(torch.argmax(logits.float()))
            assert int(token) == want and int(tokens[5 + step]) == want, (vocab, dtype, step, int(token), want)
            assert int(pos) == 5 + step and int(greedy.count) == 0   # the count is reset for the next step
print("CHECK logits of another vocabulary are refused", flush=True)
try:
    greedy.advance(torch.zeros(7), token, tokens, pos)
    raise AssertionError("no error")
except ValueError as e:
    assert "7 logits for a vocabulary of" in str(e), e
print("ok")
"""


def test_the_greedy_step_chooses_torchs_argmax_and_moves_the_state():
    _interpret(CHECK, 2)
