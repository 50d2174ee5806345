"""The words a model is asked and answers in, shared by the data stage, training and the eval: the generate
and explain questions, the answer's form, reading a reply's code block, and rendering a conversation with
the model's own chat template (the loss masked on the prompt). One module, so the prompt a server builds
at inference is token-for-token the prompt the model was trained on.
"""

from __future__ import annotations

import re

IGNORE_INDEX = -100

LANGUAGE_NAMES = {"python": "Python", "java": "Java", "go": "Go", "rust": "Rust", "c": "C", "cpp": "C++"}
# A fence opens and closes at the start of a line (up to 3 spaces in, as in Markdown): a docstring's
# indented ```pycon example inside a reply's code is code, not the end of the block.
_CODE_BLOCK = re.compile(r"^[ ]{0,3}```[\w+#.-]*[ \t]*\n(.*?)(?:^[ ]{0,3}```|\Z)", re.S | re.M)


ANSWER_FORMS = ("body", "function")  # what a generate answer holds: the body alone, or the whole function


def user_message(prompt_code: str, language: str = "python", form: str = "body") -> str:
    """The generate question: complete the function, answering with its body or with the whole function."""
    name = LANGUAGE_NAMES.get(language, language)
    ask = (
        f"Complete the body of this {name} function. Reply with the body only"
        if form == "body"
        else f"Complete this {name} function. Reply with the whole function"
    )
    return f"{ask}, in a ```{language} block.\n\n```{language}\n{prompt_code}```"


def assistant_message(body: str, language: str = "python", prompt_code: str = "") -> str:
    """The generate answer; `prompt_code` given: the whole function (signature and doc comment first)."""
    return f"```{language}\n{prompt_code}{body}```"


def explain_message(code: str, language: str = "python") -> str:
    return (
        f"Summarize what this {LANGUAGE_NAMES.get(language, language)} function does, as its doc comment's first "
        f"sentence would. Reply with the summary only.\n\n```{language}\n{code}```"
    )


def file_question(path: str, name: str, language: str, shown: str, prompt_code: str) -> str:
    """The generate question with the file shown (source/file_context.py cuts and trims it): the eval's own-code
    tasks are asked so, and data.tasks `file` trains it. The answer is the body alone."""
    return (
        f"Here is `{path}`, with the body of `{name}` cut out and marked `{hole_marker(language)}`:\n\n"
        f"```{language}\n{shown}```\n\n"
        f"Complete the body of this {LANGUAGE_NAMES.get(language, language)} function. Reply with the body "
        f"only, in a ```{language} block.\n\n```{language}\n{prompt_code}```"
    )


def hole_marker(language: str) -> str:
    """The line that stands where a function's body was cut out of its file."""
    return "# <the body to write>" if language == "python" else "// <the body to write>"


def task_turns(task: str, pair, language: str, form: str = "body") -> tuple[str, str]:
    """(user message, assistant answer) of one function for one task: "generate" (doc comment +
    signature → the body, or the whole function: `form`) or "explain" (code → summary)."""
    if task == "explain":
        return explain_message(pair.code, language), pair.summary
    whole = pair.prompt_code if form == "function" else ""
    return user_message(pair.prompt_code, language, form), assistant_message(pair.body, language, whole)


def extract_code(reply: str) -> str:
    """The first fenced code block of a reply (an unclosed one counts), else the reply itself; lines
    ending in CRLF read as lines (a closing fence after a CR must not become code)."""
    reply = reply.replace("\r\n", "\n")
    m = _CODE_BLOCK.search(reply)
    return m.group(1) if m else reply


def code_block_closed(text: str) -> bool:
    """Whether `text` already holds its first code block's closing fence: generating further cannot
    change what extract_code returns, so a generator may stop there."""
    text = text.replace("\r\n", "\n")
    m = _CODE_BLOCK.search(text)
    # closed by its fence, not merely ending in one (a docstring's own indented fence is code)
    return bool(m) and m.end() > m.end(1)


def chat_prompt(tokenizer, prompt_code: str, language: str = "python", form: str = "body") -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": user_message(prompt_code, language, form)}],
        tokenize=False,
        add_generation_prompt=True,
    )


def render_example(tokenizer, prompt_code: str, body: str, language: str = "python", form: str = "body") -> dict:
    """input_ids and labels for one pair: labels are IGNORE_INDEX over the prompt."""
    whole = prompt_code if form == "function" else ""
    return render_messages(
        tokenizer,
        [
            {"role": "user", "content": user_message(prompt_code, language, form)},
            {"role": "assistant", "content": assistant_message(body, language, whole)},
        ],
    )


def render_messages(tokenizer, messages: list[dict]) -> dict:
    """input_ids and labels for a conversation; only the assistant turns are targets.

    Each assistant turn is cut at the prompt the server would build for it (the conversation so
    far plus the generation prompt), so training sees token-for-token the serving prompt. Its
    target ends with the template's end-of-turn marker (what the server stops on), not with
    whatever whitespace the template puts after it.
    """
    ids: list[int] = []
    labels: list[int] = []
    done = ""  # text already turned into ids
    for i, msg in enumerate(messages):
        if msg["role"] != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(messages[: i + 1], tokenize=False)
        if not prompt.startswith(done) or not full.startswith(prompt):
            raise ValueError("the chat template renders earlier turns differently in a longer conversation")
        answer = full[len(prompt) :].rstrip()
        if not answer.startswith(msg["content"].rstrip()):
            raise ValueError("the chat template alters the assistant's content")
        context = tokenizer(prompt[len(done) :], add_special_tokens=False)["input_ids"]
        target = tokenizer(answer, add_special_tokens=False)["input_ids"]
        ids += context + target
        labels += [IGNORE_INDEX] * len(context) + target
        done = prompt + answer
    if not ids:
        raise ValueError("the conversation has no assistant turn")
    return {"input_ids": ids, "labels": labels}
