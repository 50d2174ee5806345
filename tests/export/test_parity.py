"""Greedy parity: a continuation that parts from the reference's only where the reference itself had
two tokens within the tolerance is a tie, not a failure; any other parting fails."""

import torch

from ferrylm.export.parity import compare, parity_device


def _ref(step_logits: list[list[float]], tokens: list[int]):
    return (torch.zeros(3, 4), tokens, [torch.tensor(s) for s in step_logits])


def test_near_tie_counts_as_tie_and_a_real_difference_does_not():
    steps = [[0.0, 5.0, 1.0, 0.0], [0.0, 2.0, 2.0 - 4e-4, 0.0], [0.0, 0.0, 0.0, 3.0]]
    ref = [_ref(steps, [1, 1, 3]), _ref(steps, [1, 1, 3]), _ref(steps, [1, 1, 3])]
    got = [
        (torch.zeros(3, 4), [1, 1, 3]),  # identical
        (torch.zeros(3, 4), [1, 2, 0]),  # parts at step 1, where 2.0 vs 1.9996: a near-tie
        (torch.zeros(3, 4), [2, 1, 3]),
    ]  # parts at step 0, where 5.0 vs 1.0: a real difference
    p = compare(ref, got, 3, tolerance=1e-3)
    assert (p.greedy_tokens_equal, p.greedy_ties, p.greedy_ok()) == (1, 1, False)
    assert compare(ref[:2], got[:2], 3, tolerance=1e-3).greedy_ok()
    assert not compare(ref[:2], got[:2], 3, tolerance=1e-4).greedy_ok()  # 4e-4 apart is past 1e-4
    assert compare(ref[:2], got[:2], 3).greedy_ties == 0  # no tolerance given: no ties


def test_outputs_without_step_logits_compare_as_before():
    ref = [(torch.zeros(2, 4), [1, 2])]
    assert compare(ref, [(torch.zeros(2, 4), [1, 3])], 2, tolerance=1.0).greedy_ties == 0


def test_forced_agreement_judges_each_step_of_the_references_continuation():
    """Logits over a 2-token prompt and the reference's 3-token continuation [1, 3, 2]: the row before each
    continuation token is the one that predicts it. The artifact's greedy text parts at its first token,
    yet reading the reference's prefix it picks the reference's token at 2 of 3 steps."""
    la = torch.zeros(5, 4)
    la[1, 1] = la[2, 3] = la[3, 2] = 1.0
    lb = la.clone()
    lb[2, 0] = 2.0  # step 2: its top token is 0, not 3
    p = compare([(la, [1, 3, 2])], [(lb, [0, 0, 0])], 3)
    assert (p.token_agreement, p.forced_agreement) == (0.0, 2 / 3)
    assert compare([(la, [1, 3, 2])], [(la, [1, 3, 2])], 3).forced_agreement == 1.0


def test_parity_runs_where_the_reference_ran_and_never_asks_for_a_missing_gpu(monkeypatch):
    """Like with like: an artifact's model follows the reference's device; without a GPU everything stays on
    the CPU; with one, a model is placed there only when the GPU has room for it."""
    model = torch.nn.Linear(4, 4)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert parity_device(model) == parity_device(model, "cuda") == parity_device(model, "cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (weights, 10 * weights))  # free, total
    assert parity_device(model) == "cpu"  # the weights alone would fill it: no headroom
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (2 * weights, 10 * weights))
    assert parity_device(model) == "cuda"
    assert parity_device(model, "cpu") == "cpu"  # the reference ran on the CPU: so does the artifact
