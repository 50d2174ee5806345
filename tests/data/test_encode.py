"""Fast tokenizing (identical ids), fill-in-the-middle, packing and the Arrow rows."""

import sysconfig
from pathlib import Path

import pytest
from tokenizers import Regex, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from ferrylm.data.encode import ArrowRows, Encoder, Packer, cpt_examples, document_end_id, fim_token_ids, load_rows
from ferrylm.models import load_tokenizer
from ferrylm.prompts import IGNORE_INDEX

QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def _texts(n=120):
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(stdlib.glob("*.py"))[:n]
    texts = [f.read_text(encoding="utf-8", errors="replace") for f in files]
    # Added tokens written literally in code ("<filename>", "<|im_end|>") are matched by the tokenizer.
    return texts + [
        "naïve café — ünïcödé\r\n\tx = 'it''s' 123456 ",
        "",
        "   \n\n  ",
        "path = 'examples/<filename>' # the file://<filename> syntax <|im_end|>\n",
    ]


@pytest.fixture(scope="module")
def qwen_style(smollm2_dir):
    """SmolLM2's vocabulary behind Qwen2's pre-tokenizer (split regex + byte level), NFC and FIM tokens."""
    tok = load_tokenizer(smollm2_dir).backend_tokenizer
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens({"additional_special_tokens": ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"]})
    return fast


def _reference(tok, texts):
    return [e.ids for e in tok.backend_tokenizer.encode_batch(texts, add_special_tokens=False)]


@pytest.mark.integration
def test_fast_encoder_is_identical_for_smollm2_and_qwen2_style(smollm2_dir, qwen_style):
    for tok in (load_tokenizer(smollm2_dir), qwen_style):
        enc = Encoder(tok, threads=2, check_docs=0)  # no built-in check: compare everything here
        assert enc.engine == "tiktoken"
        texts = _texts()
        assert enc.encode(texts) == _reference(tok, texts)


def test_encoder_falls_back_when_it_cannot_mirror(smollm2_dir):
    tok = load_tokenizer(smollm2_dir)
    tok.backend_tokenizer.normalizer = normalizers.Lowercase()
    enc = Encoder(tok, threads=2)
    assert enc.engine == "tokenizers"
    assert enc.encode(["Hello World"]) == _reference(tok, ["Hello World"])


def test_fill_in_the_middle_uses_the_tokenizers_fim_tokens(qwen_style, smollm2_dir):
    pre, mid, suf = fim_token_ids(qwen_style)
    assert qwen_style.convert_ids_to_tokens([pre, mid, suf]) == ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"]
    assert fim_token_ids(load_tokenizer(smollm2_dir)) is None  # SmolLM2 has none: plain code
    texts = _texts(40)[:40]
    keys = [f"k{i}" for i in range(len(texts))]
    end = document_end_id(qwen_style)
    out = cpt_examples(texts, keys, Encoder(qwen_style, 2), (pre, mid, suf), end, fim_rate=1.0, spm_rate=0.5, seed=0)
    orders = set()
    for text, (ids, labels) in zip(texts, out):
        ids, labels = ids.tolist(), labels.tolist()
        assert ids[0] == pre and ids[-1] == end and labels[0] == IGNORE_INDEX and labels[1:] == ids[1:]
        assert ids.count(pre) == ids.count(mid) == ids.count(suf) == 1
        if ids[1] == suf:  # SPM: <pre><suf> s <mid> p m
            orders.add("spm")
            s, pm = ids[2 : ids.index(mid)], ids[ids.index(mid) + 1 : -1]
            assert qwen_style.decode(pm) + qwen_style.decode(s) == text or len(text) == 0
        else:  # PSM: <pre> p <suf> s <mid> m
            orders.add("psm")
            p, s, m = ids[1 : ids.index(suf)], ids[ids.index(suf) + 1 : ids.index(mid)], ids[ids.index(mid) + 1 : -1]
            assert qwen_style.decode(p) + qwen_style.decode(m) + qwen_style.decode(s) == text
    assert orders == {"psm", "spm"}
    again = cpt_examples(texts, keys, Encoder(qwen_style, 2), (pre, mid, suf), end, 1.0, 0.5, seed=0)
    assert all((a[0] == b[0]).all() and (a[1] == b[1]).all() for a, b in zip(again, out))  # per seed and document


def test_packer_keeps_every_token_and_restarts_positions(tmp_path):
    examples = [
        (list(range(100 * i, 100 * i + n)), [IGNORE_INDEX] + list(range(100 * i + 1, 100 * i + n)))
        for i, n in enumerate([5, 9, 3, 12, 7, 30, 2])
    ]  # 30 > max_len: cut into pieces
    packer = Packer(max_len=16, open_rows=2)
    rows = [r for ids, lab in examples for r in packer.add(ids, lab)] + list(packer.finish())
    assert all(len(r["about"]) == sum(1 for p in r["position_ids"] if p == 0) for r in rows)  # an entry a piece
    rows = [{k: v.tolist() for k, v in r.items() if k != "about"} for r in rows]
    assert all(len(r["input_ids"]) <= 16 for r in rows)
    assert sorted(x for r in rows for x in r["input_ids"]) == sorted(x for ids, _ in examples for x in ids)
    for r in rows:
        starts = [i for i, p in enumerate(r["position_ids"]) if p == 0]
        for a, b in zip(starts, starts[1:] + [len(r["input_ids"])]):
            assert r["position_ids"][a:b] == list(range(b - a))
            assert r["labels"][a] == IGNORE_INDEX  # never predicted from the previous example
    w = ArrowRows(tmp_path / "rows.arrow", ["input_ids", "labels", "position_ids"], batch_rows=2)
    for r in rows:
        w.write(r)
    w.close()
    ds = load_rows(tmp_path / "rows.arrow")
    assert len(ds) == len(rows) and ds[1]["position_ids"] == rows[1]["position_ids"]
    assert not list(tmp_path.glob(".*.tmp"))
