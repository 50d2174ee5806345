"""data.repo_files: a training repository's files as rows in the model's repository format, fill-in-the-middle in
its own tokens after the name and path, cut into windows of whole lines that fit data.max_seq_len."""

from types import SimpleNamespace

import pytest
from transformers import PreTrainedTokenizerFast

from ferrylm.data import repo_files
from ferrylm.data.encode import fim_token_ids
from ferrylm.models import load_tokenizer
from ferrylm.prompts import IGNORE_INDEX


@pytest.fixture(scope="module")
def qwen_tokens(smollm2_dir):
    """SmolLM2's vocabulary with Qwen2.5-Coder's repository and fill-in-the-middle tokens added."""
    fast = PreTrainedTokenizerFast(tokenizer_object=load_tokenizer(smollm2_dir).backend_tokenizer)
    names = ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|repo_name|>", "<|file_sep|>"]
    fast.add_special_tokens({"additional_special_tokens": names})
    return fast


def _doc(rel: str, text: str):
    return SimpleNamespace(text=text, ref=SimpleNamespace(repo="acme", rel=rel, path=f"/r/{rel}", language="python"))


class _NothingCut:
    def cut(self, ref):
        return []


def test_a_file_is_named_by_its_repository_and_path_then_filled_in_the_middle(qwen_tokens):
    text = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(300))  # ~2,000 tokens: several windows
    d = SimpleNamespace(max_seq_len=256, fim_rate=0.5, fim_spm_rate=0.5, seed=0)
    stats = {}
    rows = list(repo_files.rows([_doc("acme/pkg/core.py", text)], _NothingCut(), {}, qwen_tokens, d, stats))
    assert stats["repo_files"] == 1 and stats["repo_file_windows"] >= 8 and len(rows) >= stats["repo_file_windows"]
    vocab = qwen_tokens.get_vocab()
    pre = fim_token_ids(qwen_tokens)[0]
    heads = [ids for ids, _, _ in rows if ids[0] == vocab["<|repo_name|>"]]
    assert {about["file"] for _, _, about in rows} == {"acme/pkg/core.py"}  # what a failed step would name
    assert len(heads) == stats["repo_file_windows"]  # each window carries the name and path
    assert qwen_tokens.decode(heads[0][:20]).startswith("<|repo_name|>acme\n<|file_sep|>acme/pkg/core.py\n")
    fim = [ids for ids in heads if pre in ids]
    assert fim and len(fim) < len(heads)  # about half filled in the middle, its tokens after the path
    assert all(list(ids).index(pre) > list(ids).index(vocab["<|file_sep|>"]) for ids in fim)
    assert all(len(ids) <= 256 and labels[0] == IGNORE_INDEX for ids, labels, _ in rows)
    again = list(repo_files.rows([_doc("acme/pkg/core.py", text)], _NothingCut(), {}, qwen_tokens, d, {}))
    assert [list(ids) for ids, _, _ in again] == [list(ids) for ids, _, _ in rows]  # seeded


def test_windows_keep_whole_lines():
    text = "a = 1\n" * 50 + "x" * 300 + "\n"
    pieces = repo_files.windows(text, 60)
    assert "".join(pieces) == text and all(p.endswith("\n") for p in pieces)
    assert all(len(p) <= 60 for p in pieces[:-1]) and len(pieces[-1]) == 301  # a longer line alone


PY = '''import functools


class Cache:
    @functools.cache
    def held(self, key):
        """Held out."""
        value = self.data[key]
        return value * 2

    def kept(self, key):
        """Trained."""
        value = self.data.get(key)
        return value
'''

GO = """package lru

// Held is held out.
// It has two lines of doc.
func Held(a, b int) int {
\tc := a + b
\treturn c * 2
}

// Kept is trained.
func Kept(a int) int {
\tb := a + 1
\treturn b
}
"""


@pytest.mark.parametrize("language, text", [("python", PY), ("go", GO)])
def test_a_held_out_function_is_taken_out_whole_and_the_rest_keeps_its_place(language, text):
    """No stub is left where a held-out function was (a placeholder body taught the model to answer a hole with
    its marker): its decorators, doc comment, signature and body go; the kept function's hole still lands on
    its own body."""
    from ferrylm.source.file_context import cut_out, with_hole
    from ferrylm.source.spans import functions

    fns = {f.name.rsplit(".", 1)[-1].lower(): f for f in functions(text, "f", language, documented=True)}
    held, kept = fns["held"], fns["kept"]
    out = cut_out(text.encode(), [held])[0].decode()
    assert "held" not in out.lower() and "* 2" not in out and "..." not in out and "…" not in out
    assert kept.body in out and out.count("\n\n\n") <= 1
    before, hole, after = with_hole(text, kept, [held])
    assert "<the body to write>" in hole and "held" not in (before + after).lower()
    assert before.rstrip().endswith(("def kept(self, key):", '"""Trained."""', "func Kept(a int) int {"))
    assert "b := a + 1" not in before + after and "self.data.get" not in before + after
