"""The user's chat files (alpaca / sharegpt / OpenAI messages) and multi-turn rendering."""

import json
from collections import Counter

import pytest

from ferrylm.config import load_config
from ferrylm.data import EmptyCorpus, run_data
from ferrylm.data.encode import load_rows
from ferrylm.data.formats import RowError, read_conversations, to_messages
from ferrylm.models import load_tokenizer
from ferrylm.prompts import IGNORE_INDEX, render_messages

ALPACA = {"instruction": "Reverse a string.", "input": "s = 'abc'", "output": "s[::-1]"}
SHAREGPT = {
    "conversations": [
        {"from": "system", "value": "Be brief."},
        {"from": "human", "value": "2+2?"},
        {"from": "gpt", "value": "4"},
        {"from": "human", "value": "and 3+3?"},
        {"from": "gpt", "value": "6"},
    ]
}
OPENAI = {"messages": [{"role": "user", "content": "Name a prime."}, {"role": "assistant", "content": "7"}]}


def test_three_forms_become_messages():
    assert to_messages(ALPACA) == [
        {"role": "user", "content": "Reverse a string.\n\ns = 'abc'"},
        {"role": "assistant", "content": "s[::-1]"},
    ]
    assert [m["role"] for m in to_messages(SHAREGPT)] == ["system", "user", "assistant", "user", "assistant"]
    assert to_messages(OPENAI) == OPENAI["messages"]
    for bad, reason in [
        ({"foo": 1}, "unknown_format"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "no_assistant_turn"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "bad_turn"),
        ({"instruction": 3, "output": "x"}, "wrong_types"),
        ([1, 2], "not_an_object"),
    ]:
        with pytest.raises(RowError, match=reason):
            to_messages(bad)


def test_multi_turn_targets_are_the_assistant_turns_only(smollm2_dir):
    tok = load_tokenizer(smollm2_dir)
    msgs = to_messages(SHAREGPT)
    ex = render_messages(tok, msgs)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    spans, start = [], None
    for i, lab in enumerate(ex["labels"] + [IGNORE_INDEX]):
        if lab != IGNORE_INDEX and start is None:
            start = i
        elif lab == IGNORE_INDEX and start is not None:
            spans.append((start, i))
            start = None
    assert [tok.decode(ex["input_ids"][a:b]) for a, b in spans] == ["4<|im_end|>", "6<|im_end|>"]
    # Before each target: exactly the prompt the server builds for that turn.
    for (a, _), upto in zip(spans, (2, 4)):
        served = tok.apply_chat_template(msgs[:upto], tokenize=False, add_generation_prompt=True)
        assert tok.decode(ex["input_ids"][:a]) == served
    assert ex["input_ids"][-1] == end


def test_chat_files_stage_counts_bad_rows(tmp_path, tiny_qwen2_dir):
    path = tmp_path / "chats.jsonl"
    rows = [json.dumps(r) for r in [ALPACA, SHAREGPT, OPENAI] * 10] + ["{not json", json.dumps({"x": 1}), ""]
    path.write_text("\n".join(rows) + "\n")
    dropped = Counter()
    assert len(list(read_conversations([str(path)], "auto", dropped))) == 30
    assert dropped == {"bad_json": 1, "unknown_format": 1}
    cfg = load_config(
        "default",
        [
            f"run_dir={tmp_path / 'run'}",
            f"model.path={tiny_qwen2_dir}",
            "data.format=jsonl",
            f"data.jsonl_files=[{path}]",
            "data.eval_fraction=0.2",
            "data.pack=true",
            "data.max_seq_len=128",
        ],
    )
    rec = run_data(cfg)
    m = rec.metrics
    assert (m["rows_read"], m["rows_dropped"]) == (30, {"bad_json": 1, "unknown_format": 1})
    assert (m["train_examples"], m["eval_examples"]) == (24, 6)
    train = load_rows(rec.outputs["train"])
    assert sum(len(r) for r in train["input_ids"]) == m["train_tokens"] and all(
        len(r) <= 128 for r in train["input_ids"]
    )
    held = [json.loads(line) for line in open(rec.outputs["eval_prompts"])]
    assert len(held) == 6 and all(h["messages"][-1]["role"] == "user" for h in held)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("{broken\n")
    with pytest.raises(EmptyCorpus, match="no usable rows"):
        run_data(cfg.model_copy(update={"data": cfg.data.model_copy(update={"jsonl_files": [str(empty)]})}))
