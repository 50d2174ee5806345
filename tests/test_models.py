"""ferrylm/models.py's readers that need no weights."""

import json

from ferrylm.models import is_w4a16


def _config(tmp_path, name, quantization=None):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2"} | ({"quantization_config": quantization} or {})))
    return d


def test_is_w4a16_knows_the_exports_4_bit_artifact_from_the_others(tmp_path):
    def groups(num_bits, kind):
        return {
            "quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"weights": {"num_bits": num_bits, "type": kind}}},
        }

    assert is_w4a16(_config(tmp_path, "w4a16", groups(4, "int")))
    assert not is_w4a16(_config(tmp_path, "fp8", groups(8, "float")))
    assert not is_w4a16(_config(tmp_path, "merged"))
