"""The tuner's step-level choice among runners-up (`tuning.refine`), on a made-up step whose time
depends on the configurations applied: the engine calls it with the captured step's real timings on a
GPU (bench/gpu_decode.py records them)."""
from ferrylm.engine.tuning import refine


def _step(applied: dict, costs: dict):
    """A step timing: the sum of each key's applied configuration's cost."""
    return lambda: sum(costs[key][cfg["block_n"]] for key, cfg in applied.items())


def test_refine_keeps_a_runner_up_only_where_the_step_gets_faster():
    configs = {"a": {"block_n": 8, "ms": 1.0, "runners_up": [{"block_n": 16, "ms": 1.1}, {"block_n": 32, "ms": 1.12}]},
               "b": {"block_n": 8, "ms": 2.0, "runners_up": [{"block_n": 16, "ms": 2.1}]},
               "c": {"block_n": 8, "ms": 3.0}}
    # Alone, 8 was fastest everywhere; in the step, a's 32 and nothing of b's beat it.
    costs = {"a": {8: 10.0, 16: 10.02, 32: 9.0}, "b": {8: 20.0, 16: 20.5}, "c": {8: 30.0}}
    applied = {key: cfg for key, cfg in configs.items()}
    log = []
    out = refine(configs, lambda key, cfg: applied.__setitem__(key, cfg), _step(applied, costs), log=log)
    assert out["a"]["block_n"] == 32 and out["a"]["step_ms"] == 59.0
    assert out["b"] is configs["b"] and out["c"] is configs["c"]
    assert {key: cfg["block_n"] for key, cfg in applied.items()} == {"a": 32, "b": 8, "c": 8}   # b's restored
    # 16 for a gains 0.03 %: under the 0.5 % a timing can move, so it is not taken.
    assert [(r.get("key"), r.get("kept")) for r in log] == [(None, None), ("a", False), ("a", True), ("b", False)]
    assert configs["a"]["block_n"] == 8   # the caller's dict is left as it was
