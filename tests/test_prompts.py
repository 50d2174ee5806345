import json

from ferrylm.data.encode import load_rows
from ferrylm.models import load_tokenizer
from ferrylm.prompts import IGNORE_INDEX, chat_prompt, extract_code, render_example


def test_loss_only_on_answer_which_ends_with_end_of_turn(smollm2_dir):
    tok = load_tokenizer(smollm2_dir)
    ex = render_example(tok, 'def f(x):\n    """Double x."""\n', "    return 2 * x\n")
    n_prompt = sum(1 for line in ex["labels"] if line == IGNORE_INDEX)
    # The masked prefix is exactly the prompt the server builds from the same user message.
    served = tok(chat_prompt(tok, 'def f(x):\n    """Double x."""\n'), add_special_tokens=False)["input_ids"]
    assert ex["input_ids"][:n_prompt] == served
    assert ex["labels"][n_prompt:] == ex["input_ids"][n_prompt:]
    assert ex["input_ids"][-1] == tok.convert_tokens_to_ids("<|im_end|>") == tok.eos_token_id
    assert tok.decode(ex["input_ids"][n_prompt:]) == "```python\n    return 2 * x\n```<|im_end|>"


def test_whole_function_answers_train_and_ask_alike(smollm2_dir):
    tok = load_tokenizer(smollm2_dir)
    code = 'def f(x):\n    """Double x."""\n'
    ex = render_example(tok, code, "    return 2 * x\n", form="function")
    n_prompt = sum(1 for label in ex["labels"] if label == IGNORE_INDEX)
    served = chat_prompt(tok, code, form="function")
    assert "Reply with the whole function" in served and "body only" not in served
    assert ex["input_ids"][:n_prompt] == tok(served, add_special_tokens=False)["input_ids"]
    assert tok.decode(ex["input_ids"][n_prompt:]) == f"```python\n{code}    return 2 * x\n```<|im_end|>"


def test_data_stage_with_whole_function_answers(make_config, tiny_qwen2_dir, tiny_corpus, tmp_path):
    from ferrylm.data import run_data

    cfg = make_config(tmp_path, tiny_qwen2_dir, tiny_corpus, "data.answer=function", "data.tasks=[generate]")
    rec = run_data(cfg)
    assert rec.metrics["answer_form"] == "function"
    held = [json.loads(line) for line in open(tmp_path / "data" / "eval.jsonl")]
    assert held and all(h["reference"].startswith(h["prompt_code"]) for h in held)
    assert all(h["answer"] == f"```{h['language']}\n{h['reference']}```" for h in held)
    assert all("whole function" in h["messages"][0]["content"] and h["answer_form"] == "function" for h in held)


def test_data_stage_splits_by_repository_without_leaks(tiny_data_run, tiny_qwen2_dir):
    data = tiny_data_run / "data"
    splits = json.loads((data / "splits.json").read_text())
    assert splits["train"] and splits["eval"] and not set(splits["train"]) & set(splits["eval"])
    held = [json.loads(line) for line in open(data / "eval.jsonl")]
    assert held and all(h["source"].split("::")[0].split("/")[1] in splits["eval"] for h in held)
    # No held-out function's prompt appears anywhere in the training rows.
    tok = load_tokenizer(tiny_qwen2_dir)
    train_text = "\n".join(tok.decode(ids) for ids in load_rows(data / "train.arrow")["input_ids"])
    assert all(h["prompt_code"] not in train_text for h in held)
    rec = json.loads((data / "record.json").read_text())
    assert rec["metrics"]["train_examples"] == len(load_rows(data / "train.arrow"))
    assert rec["metrics"]["eval_examples"] == len(held)
    assert all(len(ids) <= 256 for ids in load_rows(data / "train.arrow")["input_ids"])
    report = (data / "stats.md").read_text()
    assert f"{rec['metrics']['train_examples']:,} train" in report and (data / "lengths.png").stat().st_size > 5000


def test_extract_code():
    assert extract_code("Sure:\n```python\n    return 1\n```\nDone") == "    return 1\n"
    assert extract_code("```\nx = 1\n") == "x = 1\n"  # an unclosed block still counts
    assert extract_code("    return 1") == "    return 1"


def test_a_reply_can_stop_at_its_first_closed_code_block_without_changing_the_code():
    from ferrylm.prompts import code_block_closed

    replies = [
        "Sure!\n```python\n    return x * 2\n```\nThis doubles x, because ```inline``` ...",
        "```python\ndef f(x):\n    return x\n```",
        "```\n    return 1\n```\n\n```python\nother\n```",
        "no code at all, just words",
        "```python\n    return x  # never closed",
    ]
    for reply in replies:
        stop = next((i for i in range(len(reply) + 1) if code_block_closed(reply[:i])), None)
        if stop is None:
            assert "```" not in reply or reply.count("```") == 1  # nothing closes: all of it is read
        else:
            assert extract_code(reply[:stop]) == extract_code(reply)  # what the eval reads is unchanged
            assert reply[:stop].endswith("```")
    assert not code_block_closed("```python\n    return 1\n``")
    # a docstring's example fence, indented as code, is no closing fence however the text ends
    assert not code_block_closed('```python\n    """Examples:\n        ```')
    assert code_block_closed('```python\n    """Examples:\n        ```pycon\n        ```\n    """\n```')
