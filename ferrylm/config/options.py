"""The options tables in docs/, written from the config's own field descriptions so the two never drift.

    python -m ferrylm.config.options          # rewrite every table in docs/*.md
    python -m ferrylm.config.options --check  # exit 1 when a table is out of step (the test suite runs this)

A page holds a table where it says `<!-- options: train hardware -->`, up to `<!-- /options -->`.
"""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path

from pydantic import BaseModel

from .loader import Config

BLOCK = re.compile(r"(<!-- options: ([a-z_ ]+) -->\n)(.*?)(<!-- /options -->)", re.S)


def fields(model: type[BaseModel] = Config, prefix: str = ""):
    """(dotted key, FieldInfo) of every leaf option, in declaration order."""
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            yield from fields(info.annotation, f"{prefix}{name}.")
        else:
            yield prefix + name, info


def _type(annotation) -> str:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(str(a) for a in args)
    if type(None) in args:
        return _type(next(a for a in args if a is not type(None))) + " or null"
    if args and typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(_type(a) for a in args)
    if typing.get_origin(annotation) in (list, dict):
        return "list" if typing.get_origin(annotation) is list else "map"
    return getattr(annotation, "__name__", str(annotation))


def _default(info) -> str:
    value = info.get_default(call_default_factory=True)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return str(value).replace("'", "")


def table(sections: list[str]) -> str:
    rows = ["| key | type | default | what it does |", "|---|---|---|---|"]
    for key, info in fields():
        if key.split(".")[0] in sections or (key == "run_dir" and "run_dir" in sections):
            text = " ".join((info.description or "").split()).replace("|", "\\|").replace("<", "&lt;")
            rows.append(f"| `{key}` | {_type(info.annotation)} | `{_default(info)}` | {text} |")
    return "\n".join(rows) + "\n"


def render(page: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + table(m.group(2).split()) + m.group(4), page)


def main(argv: list[str]) -> int:
    docs = Path(__file__).resolve().parents[2] / "docs"
    stale = []
    for page in sorted(docs.glob("*.md")):
        text = page.read_text()
        if (new := render(text)) != text:
            stale.append(page.name)
            if "--check" not in argv:
                page.write_text(new)
    if stale and "--check" in argv:
        print(f"options tables out of step with the config in {', '.join(stale)}: run python -m ferrylm.config.options")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
