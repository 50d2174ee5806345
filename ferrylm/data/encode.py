"""Tokenize fast and in parallel, build fill-in-the-middle examples, pack, write memory-mapped Arrow.

Tokenizing bounds the cpt pipeline. For byte-level BPE tokenizers (GPT-2 style: SmolLM2, Qwen2)
the same vocabulary runs in tiktoken about 4× faster than in `tokenizers` (benchmarks/tokenizer_speed.py); `Encoder` builds that
twin, checks it gives identical ids on the first documents it sees, and falls back to the
tokenizer itself (logged) on any difference or any tokenizer it cannot mirror.
"""

from __future__ import annotations

import json
import random
import time
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..log import get_logger
from ..manifest import temporary_name
from ..prompts import IGNORE_INDEX

log = get_logger("data")

_GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_FIM_NAMES = [
    ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"),  # Qwen2.5
    ("<fim_prefix>", "<fim_middle>", "<fim_suffix>"),
]  # StarCoder family


def _tiktoken_twin(tokenizer):
    """A tiktoken Encoding with the tokenizer's vocabulary, split pattern and added tokens, or None."""
    try:
        import tiktoken
        from transformers.convert_slow_tokenizer import bytes_to_unicode
    except ImportError:
        return None, None
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    model, pre, norm = spec.get("model") or {}, spec.get("pre_tokenizer") or {}, spec.get("normalizer")
    if model.get("type") != "BPE" or model.get("dropout") or model.get("continuing_subword_prefix"):
        return None, None
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        pattern = _GPT2_PATTERN
    elif (
        pre.get("type") == "Sequence"
        and len(pre["pretokenizers"]) == 2
        and pre["pretokenizers"][0].get("type") == "Split"
        and pre["pretokenizers"][0].get("behavior") == "Isolated"
        and "Regex" in pre["pretokenizers"][0].get("pattern", {})
        and pre["pretokenizers"][1].get("type") == "ByteLevel"
        and not pre["pretokenizers"][1].get("use_regex", True)
    ):
        pattern = pre["pretokenizers"][0]["pattern"]["Regex"]  # Qwen2's split
    else:
        return None, None
    if norm is not None and norm.get("type") != "NFC":
        return None, None
    u2b = {u: b for b, u in bytes_to_unicode().items()}
    added = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
    # The tokenizer matches its added tokens (e.g. "<filename>") inside raw text; the twin does the
    # same through tiktoken's special tokens, which match only exactly, unstripped.
    if any(t.get("lstrip") or t.get("rstrip") or t.get("single_word") for t in spec.get("added_tokens", [])):
        return None, None
    try:
        ranks = {bytes(u2b[c] for c in tok): i for tok, i in model["vocab"].items() if tok not in added}
        enc = tiktoken.Encoding("ferrylm-twin", pat_str=pattern, mergeable_ranks=ranks, special_tokens=added)
    except (KeyError, ValueError) as e:
        log.info("data: tiktoken twin unavailable (%s); tokenizing with the tokenizer itself", e)
        return None, None
    return enc, (norm is not None)


class Encoder:
    """`encode(texts)` → token ids (no special tokens), identical to the tokenizer's own."""

    def __init__(self, tokenizer, threads: int, check_docs: int = 64):
        self.tokenizer = tokenizer
        self.threads = max(1, threads)
        self.twin, self.nfc = _tiktoken_twin(tokenizer)
        self._unchecked = check_docs if self.twin else 0
        self.engine = "tiktoken" if self.twin else "tokenizers"
        self.seconds = 0.0

    def encode(self, texts: list[str]) -> list[list[int]]:
        t0 = time.perf_counter()
        try:
            return self._encode(texts)
        finally:
            self.seconds += time.perf_counter() - t0

    def _reference(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False)]

    def _encode(self, texts: list[str]) -> list[list[int]]:
        if not self.twin:
            return self._reference(texts)
        norm = [unicodedata.normalize("NFC", t) for t in texts] if self.nfc else texts
        ids = self.twin.encode_batch(norm, num_threads=self.threads, allowed_special="all")
        if self._unchecked > 0:
            probe = texts[: self._unchecked]
            if self._reference(probe) != ids[: len(probe)]:
                log.warning("data: tiktoken twin differs from the tokenizer; using the tokenizer")
                self.twin, self.engine = None, "tokenizers"
                return self._reference(texts)
            self._unchecked -= len(probe)
        return ids


def fim_token_ids(tokenizer) -> tuple[int, int, int] | None:
    """(prefix, middle, suffix) ids when the vocabulary has fill-in-the-middle tokens."""
    vocab = tokenizer.get_vocab()
    for names in _FIM_NAMES:
        if all(n in vocab for n in names):
            return tuple(vocab[n] for n in names)
    return None


def document_end_id(tokenizer) -> int:
    vocab = tokenizer.get_vocab()
    return vocab.get("<|endoftext|>", tokenizer.eos_token_id)


def cpt_examples(
    texts: list[str],
    keys: list[str],
    encoder: Encoder,
    fim: tuple[int, int, int] | None,
    end_id: int,
    fim_rate: float,
    spm_rate: float,
    seed: int,
    heads: list[list[int]] | None = None,
) -> list[tuple[list[int], list[int]]]:
    """(input_ids, labels) per document; with FIM, a document is cut at two random characters into
    prefix/middle/suffix and rendered PSM (<pre>p<suf>s<mid>m) or SPM (<pre><suf>s<mid>p m). `heads`: ids
    put before each document (and before its FIM tokens): the repository format's name and path."""
    pieces, plans = [], []
    for text, key in zip(texts, keys):
        rng = random.Random(f"{seed}:{key}")
        if fim and rng.random() < fim_rate:
            i, j = sorted(rng.randrange(len(text) + 1) for _ in range(2))
            plans.append(("spm" if rng.random() < spm_rate else "psm", len(pieces)))
            pieces.extend([text[:i], text[i:j], text[j:]])
        else:
            plans.append(("plain", len(pieces)))
            pieces.append(text)
    ids = encoder.encode(pieces)
    out = []
    for n, (kind, k) in enumerate(plans):
        if kind == "plain":
            parts = [ids[k]]
        else:
            pre, mid, suf = ids[k], ids[k + 1], ids[k + 2]
            p, m, s = fim
            parts = [[p], pre, [s], suf, [m], mid] if kind == "psm" else [[p, s], suf, [m], pre, mid]
        parts = ([heads[n]] if heads else []) + parts
        seq = np.empty(sum(map(len, parts)) + 1, dtype=np.int32)
        at = 0
        for part in parts:  # each list converted once, straight into the row's array
            seq[at : at + len(part)] = part
            at += len(part)
        seq[-1] = end_id
        # The first token is never a target: in a packed row it would be predicted from the
        # previous document.
        labels = seq.copy()
        labels[0] = IGNORE_INDEX
        out.append((seq, labels))
    return out


class Packer:
    """First-fit packing into rows of at most `max_len` tokens over a few open rows (the fullest is
    written out when too many are open); a longer example is cut into pieces.

    Each row carries position ids that restart at 0 for every example — the model derives a
    block-diagonal attention mask from them, so no example sees another.
    """

    def __init__(self, max_len: int, open_rows: int = 16):
        self.max_len, self.open_rows = max_len, open_rows
        self._rows: list[list] = []  # [tokens so far, [(ids, labels) pieces]]
        self.examples = 0

    def add(self, ids, labels, about: dict | None = None) -> Iterator[dict]:
        """`about`: what the example is (its repository, function, task), listed with each row it lands in."""
        ids, labels = np.asarray(ids, dtype=np.int32), np.asarray(labels, dtype=np.int32)
        for start in range(0, len(ids), self.max_len):
            piece, lab = ids[start : start + self.max_len], labels[start : start + self.max_len]
            if start:
                lab = lab.copy()
                lab[0] = IGNORE_INDEX
            row = next((r for r in self._rows if r[0] + len(piece) <= self.max_len), None)
            if row is None:
                row = [0, []]
                self._rows.append(row)
            row[0] += len(piece)
            row[1].append((piece, lab, about or {}))
            self.examples += 1
            if len(self._rows) > self.open_rows:
                fullest = max(range(len(self._rows)), key=lambda i: self._rows[i][0])
                yield _packed(self._rows.pop(fullest)[1])

    def finish(self) -> Iterator[dict]:
        yield from (_packed(pieces) for _, pieces in self._rows)
        self._rows = []


def _packed(pieces: list[tuple[np.ndarray, np.ndarray, dict]]) -> dict:
    return {
        "input_ids": np.concatenate([p for p, _, _ in pieces]),
        "labels": np.concatenate([lab for _, lab, _ in pieces]),
        "position_ids": np.concatenate([np.arange(len(p), dtype=np.int32) for p, _, _ in pieces]),
        "about": [a for _, _, a in pieces],
    }


class ArrowRows:
    """Rows of int32 lists written as an Arrow stream, the file format `datasets` memory-maps."""

    def __init__(self, path: Path, columns: Iterable[str], batch_rows: int = 512):
        self.path, self.columns, self.batch_rows = Path(path), list(columns), batch_rows
        self.tmp = temporary_name(self.path)
        schema = pa.schema([(c, pa.list_(pa.int32())) for c in self.columns])
        self._sink = pa.OSFile(str(self.tmp), "wb")
        self._writer = pa.ipc.new_stream(self._sink, schema)
        self._buf: list[dict] = []
        self.rows = self.tokens = 0

    def write(self, row: dict) -> None:
        self._buf.append(row)
        self.rows += 1
        self.tokens += len(row["input_ids"])
        if len(self._buf) >= self.batch_rows:
            self._write_batch()

    def _write_batch(self) -> None:
        if not self._buf:
            return
        arrays = []
        for c in self.columns:  # one int32 buffer and its offsets per column: no Python int is touched
            values = [np.asarray(r[c], dtype=np.int32) for r in self._buf]
            offsets = np.zeros(len(values) + 1, dtype=np.int32)
            np.cumsum([len(v) for v in values], out=offsets[1:])
            arrays.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.concatenate(values))))
        self._writer.write_batch(pa.record_batch(arrays, names=self.columns))
        self._buf = []

    def close(self) -> Path:
        self._write_batch()
        self._writer.close()
        self._sink.close()
        self.tmp.replace(self.path)
        return self.path


def load_rows(path: str | Path):
    """A memory-mapped `datasets.Dataset` over a file written by `ArrowRows`."""
    from datasets import Dataset

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `ferrylm data` first")
    return Dataset.from_file(str(path))
