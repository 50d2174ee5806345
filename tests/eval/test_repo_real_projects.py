"""Real projects with their own tests, one per language the Makefile installs one for: the finder keeps the tasks
their tests prove, and every original passes when given back as a reply, alone and as the whole function."""

import json
import shutil
from pathlib import Path

import pytest

from ferrylm.eval.repo.splice import score
from ferrylm.eval.repo.tasks import find_tasks

STRSIM = Path("/usr/share/cargo/registry/strsim-0.10.0")  # Debian's librust-strsim-dev (make toolchains)


@pytest.mark.slow
@pytest.mark.skipif(
    not STRSIM.is_dir() or shutil.which("cargo") is None, reason="librust-strsim-dev or cargo is not installed"
)
def test_a_real_crate_strsim_gives_its_tasks_and_its_originals_pass(tmp_path):
    repo = tmp_path / "strsim"
    shutil.copytree(STRSIM, repo)
    found = find_tasks(repo, workers=2)
    names = {t["name"] for t in found.tasks}
    # hamming returns an alias of a Result, bigrams an impl Iterator: both are tasks
    assert {"hamming", "generic_hamming", "bigrams", "levenshtein", "jaro_winkler"} <= names, found.summary()
    assert len(names) >= 14 and not any(c["id"].startswith("benches/") for c in found.considered)
    assert found.dropped.get("its body is longer than 40 lines") == 1  # generic_jaro, listed with its reason
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in found.tasks))
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        "".join(json.dumps({"task_id": t["task_id"], "completion": t["body"]}) + "\n" for t in found.tasks)
    )
    out = score(tasks, samples)
    assert out["passed_samples"] == len(found.tasks), out
