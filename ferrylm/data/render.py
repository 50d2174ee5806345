"""Render pairs with the model's own chat template, masking the loss on the prompt.

The same wording is used by the eval stage when it asks an endpoint for a completion, so the
prompt the server builds at inference is token-for-token the prompt the model was trained on.
"""
from __future__ import annotations

import re

IGNORE_INDEX = -100

_INSTRUCTION = (
    "Complete the body of this Python function. Reply with the body only, in a ```python block.\n\n"
)
_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def user_message(prompt_code: str) -> str:
    return f"{_INSTRUCTION}```python\n{prompt_code}```"


def assistant_message(body: str) -> str:
    return f"```python\n{body}```"


def extract_code(reply: str) -> str:
    """The first fenced code block of a reply (an unclosed one counts), else the reply itself."""
    m = _CODE_BLOCK.search(reply)
    return m.group(1) if m else reply


def chat_prompt(tokenizer, prompt_code: str) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": user_message(prompt_code)}], tokenize=False, add_generation_prompt=True
    )


def render_example(tokenizer, prompt_code: str, body: str) -> dict:
    """input_ids and labels for one pair: labels are IGNORE_INDEX over the prompt.

    The answer ends with the template's end-of-turn marker (what the server stops on), not with
    whatever whitespace the template puts after it.
    """
    prompt = chat_prompt(tokenizer, prompt_code)
    answer = assistant_message(body)
    full = tokenizer.apply_chat_template(
        [{"role": "user", "content": user_message(prompt_code)}, {"role": "assistant", "content": answer}],
        tokenize=False,
    )
    if not full.startswith(prompt):
        raise ValueError("the chat template renders the prompt differently inside a full conversation")
    answer_text = full[len(prompt):].rstrip()
    if not answer_text.startswith(answer):
        raise ValueError("the chat template alters the assistant's content")
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    answer_ids = tokenizer(answer_text, add_special_tokens=False)["input_ids"]
    return {
        "input_ids": prompt_ids + answer_ids,
        "labels": [IGNORE_INDEX] * len(prompt_ids) + answer_ids,
    }
