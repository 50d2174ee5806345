import json

from ferrylm.data.render import IGNORE_INDEX, chat_prompt, extract_code, render_example
from ferrylm.models import load_tokenizer


def test_loss_only_on_answer_which_ends_with_end_of_turn(smollm2_dir):
    tok = load_tokenizer(smollm2_dir)
    ex = render_example(tok, "def f(x):\n    \"\"\"Double x.\"\"\"\n", "    return 2 * x\n")
    n_prompt = sum(1 for l in ex["labels"] if l == IGNORE_INDEX)
    # The masked prefix is exactly the prompt the server builds from the same user message.
    served = tok(chat_prompt(tok, "def f(x):\n    \"\"\"Double x.\"\"\"\n"), add_special_tokens=False)["input_ids"]
    assert ex["input_ids"][:n_prompt] == served
    assert ex["labels"][n_prompt:] == ex["input_ids"][n_prompt:]
    assert ex["input_ids"][-1] == tok.convert_tokens_to_ids("<|im_end|>") == tok.eos_token_id
    assert tok.decode(ex["input_ids"][n_prompt:]) == "```python\n    return 2 * x\n```<|im_end|>"


def test_data_stage_writes_split_without_leaks(tiny_data_run):
    rows = {s: [json.loads(l) for l in open(tiny_data_run / "data" / f"{s}.jsonl")] for s in ("train", "eval")}
    assert rows["train"] and rows["eval"]
    files = {s: {r["source"].split("::")[0] for r in rows[s]} for s in rows}
    assert not files["train"] & files["eval"]  # split by file: no function of a held-out file is trained on
    rec = json.loads((tiny_data_run / "data" / "record.json").read_text())
    assert rec["metrics"]["train_examples"] == len(rows["train"])
    assert all(len(r["input_ids"]) <= 256 for r in rows["train"])


def test_extract_code():
    assert extract_code("Sure:\n```python\n    return 1\n```\nDone") == "    return 1\n"
    assert extract_code("```\nx = 1\n") == "x = 1\n"  # an unclosed block still counts
    assert extract_code("    return 1") == "    return 1"
