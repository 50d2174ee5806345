"""Packed rows: the loss of a packed batch equals the loss of the same examples unpacked."""

import torch
from transformers import AutoModelForCausalLM

from ferrylm.data.encode import Packer
from ferrylm.prompts import IGNORE_INDEX
from ferrylm.train.dataset import PadCollator, packing_self_test, split_packed


def _examples():
    g = torch.Generator().manual_seed(0)
    out = []
    for n, masked in [(23, 5), (40, 12), (9, 0), (31, 31 - 4)]:
        ids = torch.randint(20, 1000, (n,), generator=g).tolist()
        out.append((ids, [IGNORE_INDEX] * max(1, masked) + ids[max(1, masked) :]))
    return out


def _packed_rows():
    packer = Packer(max_len=128)
    return [r for ids, lab in _examples() for r in packer.add(ids, lab)] + list(packer.finish())


def test_packed_loss_equals_unpacked_loss(tiny_qwen2_dir):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32, attn_implementation="sdpa")
    rows = _packed_rows()
    assert len(rows) == 1 and len(split_packed(rows[0])) == 4
    packed, unpacked = packing_self_test(model, rows[0])
    assert abs(packed - unpacked) < 1e-5, (packed, unpacked)

    # The check can fail: the same row with positions that do not restart (one long sequence,
    # every example attending to the ones before it) gives a different loss.
    leaky = dict(rows[0], position_ids=list(range(len(rows[0]["input_ids"]))))
    assert abs(packing_self_test(model, leaky)[0] - unpacked) > 1e-3

    # A batch through the training collator: padding neither adds loss nor leaks attention.
    batch = PadCollator(pad_id=0)([rows[0], split_packed(rows[0])[1] | {"position_ids": list(range(40))}])
    assert "attention_mask" not in batch and batch["position_ids"][1, 40:].tolist() == list(
        range(len(rows[0]["input_ids"]) - 40)
    )
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], use_cache=False).logits
        alone = model(input_ids=batch["input_ids"][1:, :40]).logits
    assert torch.allclose(logits[1, :40], alone[0], atol=1e-5)


def test_flattened_batch_has_the_padded_batch_loss_and_gradients(tiny_qwen2_dir):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32, attn_implementation="sdpa")
    exs = [{"input_ids": ids, "labels": lab} for ids, lab in _examples()]
    exs[2]["labels"] = list(exs[2]["input_ids"])  # its first label is a target, which padding never asks for

    def loss_and_grads(batch):
        model.zero_grad()
        out = model(**batch, use_cache=False)
        out.loss.backward()
        return out.loss.item(), [p.grad.clone() for p in model.parameters()]

    padded, flat = PadCollator(pad_id=0)(exs), PadCollator(pad_id=0, flatten=True)(exs)
    every = PadCollator(pad_id=0, flatten=True, only_scored=False)(exs)  # logits at every position
    assert flat["input_ids"].shape == (1, sum(len(e["input_ids"]) for e in exs)) and "attention_mask" not in flat
    loss, grads = loss_and_grads(padded)
    for batch in (flat, every):
        flat_loss, flat_grads = loss_and_grads(batch)
        assert abs(flat_loss - loss) < 1e-5, (flat_loss, loss)
        assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(grads, flat_grads))
    # Only the scored positions' logits are computed: one per target.
    targets = sum(1 for y in every["labels"][0, 1:].tolist() if y != -100)
    assert flat["shift_labels"].shape == (1, targets) < every["labels"].shape
    assert model(**flat, use_cache=False).logits.shape[1] == targets

    # The check can fail: keeping the label at a restart asks the previous example's last token for it.
    naive = dict(every, labels=torch.tensor([[y for e in exs for y in e["labels"]]]))
    assert abs(loss_and_grads(naive)[0] - loss) > 1e-4


def test_a_micro_batch_of_one_scores_only_its_targets(tiny_qwen2_dir):
    """One row (a packed row, or one example padded to itself): logits only at scored positions, the
    loss and gradients of the row with logits everywhere."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32, attn_implementation="sdpa")
    rows = _packed_rows()
    one = {"input_ids": rows[0]["input_ids"], "labels": rows[0]["labels"]}
    for row in (rows[0], one):
        batch, every = PadCollator(pad_id=0)([row]), PadCollator(pad_id=0, only_scored=False)([row])
        assert "logits_to_keep" in batch and "logits_to_keep" not in every
        got, want = [], []
        for inputs, out in ((batch, got), (every, want)):
            model.zero_grad()
            result = model(**inputs, use_cache=False)
            result.loss.backward()
            out += [result.loss.item(), result.logits.shape[1]] + [p.grad.clone() for p in model.parameters()]
        assert abs(got[0] - want[0]) < 1e-5 and got[1] == batch["shift_labels"].shape[1] < want[1]
        assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(got[2:], want[2:]))
    assert "logits_to_keep" not in PadCollator(pad_id=0)([one, one])  # two rows: every position


def test_compiled_layers_take_any_number_of_targets_in_one_graph(tiny_qwen2_dir):
    """The scored positions change shape every batch; they reach the decoder layers among the model's
    keyword arguments, and must not make compiled layers compile again (a graph a shape)."""
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()  # reset() keeps the counts of tests before this one
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32, attn_implementation="sdpa")
    for layer in model.model.layers:
        layer.compile(backend="eager")  # dynamo's graphs and guards, without a C++ compiler
    g = torch.Generator().manual_seed(0)
    for answer in (10, 17, 23, 31, 5, 50):
        ids = torch.randint(20, 1000, (64,), generator=g).tolist()
        batch = PadCollator(pad_id=0)(
            [{"input_ids": ids, "labels": [IGNORE_INDEX] * (64 - answer) + ids[64 - answer :]}]
        )
        assert batch["shift_labels"].shape[1] == answer
        model(**batch, use_cache=False).loss.backward()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()
