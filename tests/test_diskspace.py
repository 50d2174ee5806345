"""A full disk said in one line: a write that raises ENOSPC at a chosen byte count, torch's zip
writer losing the errno, the partial output removed, and the stages' own writes."""

import errno
from pathlib import Path

import pytest

from ferrylm import diskspace
from ferrylm.diskspace import DiskFull, enough_room, out_of_space


class _FillsAt:
    """A file whose disk fills after `limit` bytes."""

    def __init__(self, path: Path, limit: int):
        self.fh, self.left = open(path, "wb"), limit

    def write(self, data: bytes) -> None:
        if len(data) > self.left:
            self.fh.write(data[: self.left])
            self.left = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.fh.write(data)
        self.left -= len(data)


def test_enospc_at_a_chosen_byte_becomes_one_line_and_the_partial_file_goes(tmp_path):
    out = tmp_path / "merged"
    out.mkdir()
    with pytest.raises(DiskFull) as e:
        with out_of_space("the merged model", out, lambda: [p.unlink() for p in out.iterdir()]):
            f = _FillsAt(out / "model.safetensors", 1000)
            for _ in range(10):
                f.write(b"x" * 300)
    msg = str(e.value)
    assert msg.startswith(f"out of disk space writing the merged model to {out}: ") and "free there" in msg
    assert "\n" not in msg and e.value.exit_code == 2
    assert list(out.iterdir()) == []  # removed at once


def test_torch_zip_writer_failure_counts_only_on_a_nearly_full_disk(tmp_path, monkeypatch):
    torch_says = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 502144 vs 502032")
    with pytest.raises(RuntimeError, match="unexpected pos"):  # plenty of room: not ours to rename
        with out_of_space("a checkpoint", tmp_path):
            raise torch_says
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: 4096)
    with pytest.raises(DiskFull, match="writing a checkpoint to .*: 4.1 KB free there"):
        with out_of_space("a checkpoint", tmp_path, writing=lambda: tmp_path / "checkpoint-8"):
            raise torch_says
    with pytest.raises(ValueError):  # other errors pass through unchanged
        with out_of_space("a checkpoint", tmp_path):
            raise ValueError("not a disk")


def test_the_warning_before_training_names_the_numbers(tmp_path, monkeypatch):
    assert enough_room(10, tmp_path) is None
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: 2_000_000)
    assert enough_room(106_000_000_000, tmp_path) == f"2.0 MB free under {tmp_path}, and this run writes about 106.0 GB"


def test_the_data_stage_removes_its_partial_rows_on_a_full_disk(
    tmp_path, monkeypatch, tiny_qwen2_dir, tiny_corpus, make_config
):
    from ferrylm.data import encode, run_data

    real = encode.ArrowRows._write_batch
    calls = {"n": 0}

    def fills(self):
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self)

    monkeypatch.setattr(encode.ArrowRows, "_write_batch", fills)
    cfg = make_config(tmp_path / "run", tiny_qwen2_dir, tiny_corpus, "data.workers=1")
    with pytest.raises(DiskFull, match="out of disk space writing the data stage's Arrow rows to "):
        run_data(cfg)
    data = tmp_path / "run" / "data"
    assert not list(data.glob("*.arrow")) and not list(data.glob(".*.tmp"))  # nothing half-written left
