"""The user's own chat data: JSONL rows in alpaca, sharegpt or OpenAI-messages form → messages.

alpaca:   {"instruction", "input"?, "output", "system"?}
sharegpt: {"conversations": [{"from": "system"|"human"|"gpt", "value"}], "system"?}
openai:   {"messages": [{"role": "system"|"user"|"assistant", "content"}]}

A row that is not valid JSON or fits no form is counted under a reason and skipped, never fatal.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

_SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
}


class RowError(ValueError):
    pass


def detect(row: dict) -> str:
    if "messages" in row:
        return "openai"
    if "conversations" in row:
        return "sharegpt"
    if "instruction" in row and "output" in row:
        return "alpaca"
    raise RowError("unknown_format")


def to_messages(row: dict, fmt: str = "auto") -> list[dict]:
    if not isinstance(row, dict):
        raise RowError("not_an_object")
    fmt = detect(row) if fmt == "auto" else fmt
    if fmt == "alpaca":
        instruction, extra, output = row.get("instruction"), row.get("input") or "", row.get("output")
        if not isinstance(instruction, str) or not isinstance(output, str) or not isinstance(extra, str):
            raise RowError("wrong_types")
        msgs = [{"role": "system", "content": row["system"]}] if isinstance(row.get("system"), str) else []
        msgs += [
            {"role": "user", "content": f"{instruction}\n\n{extra}" if extra else instruction},
            {"role": "assistant", "content": output},
        ]
    elif fmt == "sharegpt":
        turns = row.get("conversations")
        if not isinstance(turns, list):
            raise RowError("wrong_types")
        msgs = [{"role": "system", "content": row["system"]}] if isinstance(row.get("system"), str) else []
        for t in turns:
            if not isinstance(t, dict) or t.get("from") not in _SHAREGPT_ROLES or not isinstance(t.get("value"), str):
                raise RowError("bad_turn")
            msgs.append({"role": _SHAREGPT_ROLES[t["from"]], "content": t["value"]})
    elif fmt == "openai":
        turns = row.get("messages")
        if not isinstance(turns, list):
            raise RowError("wrong_types")
        msgs = []
        for t in turns:
            if (
                not isinstance(t, dict)
                or t.get("role") not in ("system", "user", "assistant")
                or not isinstance(t.get("content"), str)
            ):
                raise RowError("bad_turn")
            msgs.append({"role": t["role"], "content": t["content"]})
    else:
        raise RowError("unknown_format")
    if not any(m["role"] == "assistant" and m["content"].strip() for m in msgs):
        raise RowError("no_assistant_turn")
    return msgs


def read_conversations(paths: list[str], fmt: str, dropped: Counter) -> Iterator[tuple[str, list[dict]]]:
    """(row key, messages) for every usable row; the rest counted in `dropped` by reason."""
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise FileNotFoundError(f"data.jsonl_files: {p} does not exist")
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield f"{path.name}:{n}", to_messages(json.loads(line), fmt)
                except json.JSONDecodeError:
                    dropped["bad_json"] += 1
                except RowError as e:
                    dropped[str(e)] += 1
