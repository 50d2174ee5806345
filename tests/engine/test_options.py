"""The engine's modes are one validated object: forbidden pairs and malformed values are refused in one
line before any weight is touched, and an engine built from the object decodes as one built from keywords."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from ferrylm.engine import Engine, EngineOptions


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"int4_group": 128, "w4a16_dir": "artifact"}, "int4_group and w4a16_dir each choose"),
        ({"int4_group": 100}, "int4_group must be a power of two, not 100"),
        ({"gemv": True, "gemv_fixed": {"block_n": 4}}, "gemv_fixed names block_n, block_k, num_warps, num_stages"),
        ({"gemv_fixed": {"block_n": 4, "block_k": 64, "num_warps": 4, "num_stages": 1}}, "it needs gemv=True"),
        ({"prefill_bucket": 0}, "prefill_bucket must be positive, not 0"),
    ],
)
def test_bad_combinations_are_refused_in_one_line(fields, message):
    with pytest.raises(ValueError, match=message):
        EngineOptions(**fields)


def test_what_a_combination_means():
    assert not EngineOptions().fused_decoder
    assert all(EngineOptions(**f).fused_decoder for f in ({"fused": True}, {"int4_group": 32}, {"w4a16_dir": "d"}))
    assert EngineOptions().compiled("cuda") and not EngineOptions().compiled("cpu")
    assert EngineOptions(compile=False).compiled("cuda") is False


def test_an_engine_from_options_decodes_as_one_from_keywords(tiny_qwen2_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32)
    ids = [5, 17, 30, 40, 12]
    by_keywords = Engine(model, max_len=32, compile=False, tune=False, fused=True)
    by_object = Engine(model, max_len=32, options=EngineOptions(compile=False, tune=False, fused=True))
    assert by_object.decoder is not None and list(by_object.stream(ids, 8)) == list(by_keywords.stream(ids, 8))
    with pytest.raises(ValueError, match=r"give options or its fields \(fused\), not both"):
        Engine(model, max_len=32, options=EngineOptions(), fused=True)
    with pytest.raises(TypeError):
        Engine(model, max_len=32, fusd=True)  # a misspelt switch is not silently ignored
