"""data.repo_files: the training repositories' own files as continued pre-training rows beside the sft examples,
so the rest of a repository (its helpers, types and conventions) reaches the model, not only its documented
functions. Each file in the model's repository format (`<|repo_name|>` name, `<|file_sep|>` path, where the
vocabulary has them; a comment line naming the path where not), in windows of about data.max_seq_len tokens,
fill-in-the-middle at data.fim_rate in the model's own FIM tokens. Every held-out function, and every near copy of
one, is taken out of its file whole first, its doc comment too (data/file_context.cut_out); test files never give a row.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..prompts import IGNORE_INDEX
from ..source.file_context import CHARS_PER_TOKEN, cut_out
from ..source.test_files import is_test_file
from .encode import Encoder, cpt_examples, document_end_id, fim_token_ids
from .file_examples import FileShown, in_repo
from .holdout import drawn

# (repository name, file separator) tokens: Qwen2.5-Coder's, then the StarCoder family's (SmolLM2)
_REPO_TOKENS = [("<|repo_name|>", "<|file_sep|>"), ("<repo_name>", "<file_sep>")]
_COMMENT = {"python": "#", "go": "//", "rust": "//", "java": "//", "cpp": "//"}


def chosen(docs, held: set, roots: dict, share: float, seed: int) -> list:
    """The training repositories' source files drawn (seeded per file): of repositories whose tests the eval
    runs (roots), never a held-out repository's, never a test file."""
    return [
        doc
        for doc in docs
        if doc.ref.repo in roots
        and doc.ref.repo not in held
        and not is_test_file(in_repo(doc.ref, roots))
        and drawn(seed, f"file:{doc.ref.rel}", share)
    ]


def windows(text: str, chars: int) -> list[str]:
    """The text in pieces of whole lines, each at most `chars` characters (a longer line alone)."""
    out, piece = [], ""
    for line in text.splitlines(keepends=True):
        if piece and len(piece) + len(line) > chars:
            out.append(piece)
            piece = ""
        piece += line
    return out + ([piece] if piece.strip() else [])


def rows(
    docs, shown: FileShown, roots: dict, tokenizer, d, stats: dict
) -> Iterator[tuple[np.ndarray, np.ndarray, dict]]:
    """(input_ids, labels, what the row is) rows of at most d.max_seq_len tokens, every token a target but each row's first."""
    vocab = tokenizer.get_vocab()
    names = next(((vocab[a], vocab[b]) for a, b in _REPO_TOKENS if a in vocab and b in vocab), None)
    encoder = Encoder(tokenizer, threads=1)
    texts, keys, heads, abouts, cut_functions = [], [], [], [], 0
    for doc in docs:
        cut = shown.cut(doc.ref)
        cut_functions += len(cut)
        text = cut_out(doc.text.encode(), cut)[0].decode(errors="replace")
        path = in_repo(doc.ref, roots)
        if names:
            head = [names[0], *encoder.encode([f"{doc.ref.repo}\n"])[0], names[1], *encoder.encode([f"{path}\n"])[0]]
        else:
            head = encoder.encode([f"{_COMMENT.get(doc.ref.language, '#')} {doc.ref.repo}/{path}\n"])[0]
        room = max(d.max_seq_len - len(head) - 4, 16) * CHARS_PER_TOKEN  # 4: the FIM tokens and the end
        for n, window in enumerate(windows(text, room)):
            texts.append(window)
            keys.append(f"{doc.ref.rel}:{n}")
            heads.append(head)
            abouts.append({"repository": doc.ref.repo, "file": path, "window": n, "task": "repo-file"})
    examples = cpt_examples(
        texts,
        keys,
        encoder,
        fim_token_ids(tokenizer),
        document_end_id(tokenizer),
        d.fim_rate,
        d.fim_spm_rate,
        d.seed,
        heads,
    )
    stats.update(repo_files=len(docs), repo_file_windows=len(texts), repo_file_functions_cut=cut_functions)
    # a window longer in tokens than estimated: cut, each piece's first token no target
    for (ids, labels), about in zip(examples, abouts):
        for at in range(0, len(ids), d.max_seq_len):
            piece = labels[at : at + d.max_seq_len].copy()
            piece[0] = IGNORE_INDEX
            yield ids[at : at + d.max_seq_len], piece, about
