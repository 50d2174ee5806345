"""The engine's saved kernel configurations (`tuned.py`): what a second engine reads instead of tuning.
The engine itself runs them on a GPU only (benchmarks/gpu_decode.py --tuned-dir measures its start-up)."""

import json
import logging
import shutil
from pathlib import Path

import torch

from ferrylm.engine.kernels.gemv import ROPE, Epilogue
from ferrylm.engine.tuning import cache as tuned

KEYS = {
    (152064, 3584, Epilogue(1e-6)): {
        "block_n": 1,
        "block_k": 1024,
        "num_warps": 8,
        "num_stages": 2,
        "ms": 0.35,
        "runners_up": [{"block_n": 2}],
    },
    ("int4", 4608, 3584, 128, Epilogue(1e-6, ROPE, 128, 4096)): {
        "block_n": 8,
        "block_k": 512,
        "num_warps": 4,
        "num_stages": 1,
        "sub": 1,
        "step_ms": 2.35,
    },
}


def test_saved_configurations_come_back_under_their_keys_without_runners_up(tmp_path):
    path = tmp_path / "engine" / "configs.json"
    tuned.save(path, KEYS)
    back = tuned.load(path)
    assert set(back) == set(KEYS)  # keys with their epilogues, int4 ones too
    assert back[("int4", 4608, 3584, 128, Epilogue(1e-6, ROPE, 128, 4096))]["step_ms"] == 2.35
    assert "runners_up" not in back[(152064, 3584, Epilogue(1e-6))]  # nothing left to refine
    # A second model's shapes join the file; the first's stay.
    other = {(3584, 3584, Epilogue(residual=True)): {"block_n": 2, "block_k": 512, "num_warps": 4, "num_stages": 1}}
    tuned.save(path, other)
    assert set(tuned.load(path)) == set(KEYS) | set(other)
    assert [p.name for p in path.parent.iterdir()] == ["configs.json"]  # no temporary file left


def test_an_unreadable_file_is_ignored_with_a_warning_and_written_again(tmp_path, caplog):
    path = tmp_path / "configs.json"
    path.write_text('[{"key": [1, 2')  # a write cut short (the writer renames whole files; a disk may not)
    with caplog.at_level(logging.WARNING):
        assert tuned.load(path) == {}
    assert "ignoring the saved kernel configurations" in caplog.text and "tuning again" in caplog.text
    path.write_text(json.dumps([{"config": {}}]))  # valid JSON, not ours
    assert tuned.load(path) == {}
    tuned.save(path, KEYS)
    assert set(tuned.load(path)) == set(KEYS)
    assert tuned.load(tmp_path / "none.json") == {}


def test_a_file_that_cannot_be_written_is_a_warning_not_an_error(tmp_path, caplog, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the folder should be
    with caplog.at_level(logging.WARNING):
        assert tuned.save(blocked / "engine" / "configs.json", KEYS) is False
    assert "could not save the kernel configurations" in caplog.text

    def full(*args, **kwargs):  # the disk fills while the file is written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    assert tuned.save(tmp_path / "configs.json", KEYS) is False
    assert list(tmp_path.iterdir()) == [blocked]  # no temporary file left behind


def test_the_file_is_named_by_the_gpu_the_kernels_code_and_launch(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    sources = tmp_path / "engine"
    shutil.copytree(Path(tuned.__file__).parents[1], sources)
    first = tuned.tuned_path(True, tmp_path, sources)
    assert first.parent == tmp_path and first == tuned.tuned_path(True, tmp_path, sources)
    assert tuned.tuned_path(False, tmp_path, sources) != first  # without programmatic dependent launch
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    assert tuned.tuned_path(True, tmp_path, sources) != first  # another GPU
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    kernel = sources / "kernels" / "gemv4_kernel.py"
    kernel.write_text(kernel.read_text() + "\n# changed\n")
    assert tuned.tuned_path(True, tmp_path, sources) != first  # the kernel's code changed
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tuned.tuned_path(True).parent == tmp_path / "xdg" / "ferrylm" / "engine"


def test_an_untimed_choice_is_not_saved_so_the_next_engine_tunes_that_shape(tmp_path):
    path = tmp_path / "configs.json"
    key = (3584, 3584, Epilogue(residual=True))
    tuned.save(path, {**KEYS, key: {"block_n": 1, "block_k": 512, "num_warps": 4, "num_stages": 1, "untimed": True}})
    assert set(tuned.load(path)) == set(KEYS)


def test_the_shipped_choices_are_read_by_the_gpu_s_name_and_each_is_a_candidate_of_its_shape():
    """What ships for a GPU (engine/tuning/defaults/) is taken untried by an engine on that GPU: each must be one of
    the configurations the tuner would time for its shape, so a kernel change that drops one fails here."""
    from ferrylm.engine.tuning.choose import TIMINGS, candidates, tune4_candidates

    assert tuned.gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert tuned.shipped("A GPU nobody measured") == {}
    files = sorted(tuned.DEFAULTS.glob("*.json"))
    assert files, "no GPU's tuned choices are shipped"
    for path in files:
        configs = tuned.load(path)
        assert configs, f"{path.name} holds no configuration"
        assert tuned.shipped(path.stem) == configs
        for key, cfg in configs.items():
            if key[0] == "int4":
                allowed = list(tune4_candidates(*key[1:4], key[4]))
            else:
                allowed = list(candidates(*key))
            assert {k: v for k, v in cfg.items() if k not in TIMINGS} in allowed, (path.name, key, cfg)
