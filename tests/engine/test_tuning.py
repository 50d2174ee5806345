"""The tuner's step-level choice among runners-up (`tuning.refine`), on a made-up step whose time
depends on the configurations applied: the engine calls it with the captured step's real timings on a
GPU (benchmarks/gpu_decode.py records them)."""

from ferrylm.engine.kernels.gemv import SILU, Epilogue
from ferrylm.engine.tuning.choose import MAX_PER_THREAD, refine, tune4_candidates


def _step(applied: dict, costs: dict):
    """A step timing: the sum of each key's applied configuration's cost."""
    return lambda: sum(costs[key][cfg["block_n"]] for key, cfg in applied.items())


def test_refine_keeps_a_runner_up_only_where_the_step_gets_faster():
    configs = {
        "a": {"block_n": 8, "ms": 1.0, "runners_up": [{"block_n": 16, "ms": 1.1}, {"block_n": 32, "ms": 1.12}]},
        "b": {"block_n": 8, "ms": 2.0, "runners_up": [{"block_n": 16, "ms": 2.1}]},
        "c": {"block_n": 8, "ms": 3.0},
    }
    # Alone, 8 was fastest everywhere; in the step, a's 32 and nothing of b's beat it.
    costs = {"a": {8: 10.0, 16: 10.02, 32: 9.0}, "b": {8: 20.0, 16: 20.5}, "c": {8: 30.0}}
    applied = {key: cfg for key, cfg in configs.items()}
    log = []
    out = refine(configs, lambda key, cfg: applied.__setitem__(key, cfg), _step(applied, costs), log=log)
    assert out["a"]["block_n"] == 32 and out["a"]["step_ms"] == 59.0
    assert out["b"] is configs["b"] and out["c"] is configs["c"]
    assert {key: cfg["block_n"] for key, cfg in applied.items()} == {"a": 32, "b": 8, "c": 8}  # b's restored
    # 16 for a gains 0.03 %: under the 0.5 % a timing can move, so it is not taken. The second pass tries
    # a's first choice and 16 again, and b's 16; nothing changes, so there is no third.
    assert [(r.get("key"), r.get("kept"), r.get("pass")) for r in log] == [
        (None, None, None),
        ("a", False, 0),
        ("a", True, 0),
        ("b", False, 0),
        ("a", False, 1),
        ("a", False, 1),
        ("b", False, 1),
    ]
    assert configs["a"]["block_n"] == 8  # the caller's dict is left as it was


def test_refine_passes_again_where_one_key_s_best_depends_on_another_s():
    configs = {key: {"block_n": 8, "runners_up": [{"block_n": 16}]} for key in "ab"}
    applied = dict(configs)
    # a's 16 pays only once b is 16 too (kernels that overlap in the step): a first pass cannot see it.
    cost = {(8, 8): 10.0, (16, 8): 10.2, (8, 16): 9.0, (16, 16): 8.0}
    out = refine(
        configs,
        lambda key, cfg: applied.__setitem__(key, cfg),
        lambda: cost[applied["a"]["block_n"], applied["b"]["block_n"]],
    )
    assert (out["a"]["block_n"], out["b"]["block_n"]) == (16, 16) and out["a"]["step_ms"] == 8.0
    assert (
        refine(
            configs,
            lambda key, cfg: applied.__setitem__(key, cfg),
            lambda: cost[applied["a"]["block_n"], applied["b"]["block_n"]],
            passes=1,
        )["a"]["block_n"]
        == 8
    )


def test_the_4bit_candidates_fit_the_shape_and_a_thread_s_registers():
    gate_up = list(tune4_candidates(37888, 3584, 128, Epilogue(1e-6, SILU, 37888)))
    down = list(tune4_candidates(3584, 18944, 128, Epilogue(residual=True)))
    assert {"block_n": 8, "block_k": 512, "num_warps": 4, "num_stages": 1, "sub": 1} in gate_up
    assert {"block_n": 8, "block_k": 1024, "num_warps": 8, "num_stages": 1, "sub": 2} in down
    assert {"block_n": 8, "block_k": 1024, "num_warps": 8, "num_stages": 1, "sub": 2, "ahead": 2} in down
    for cfgs, pair in ((gate_up, 2), (down, 1)):
        assert cfgs and all(
            pair * c["block_n"] * c["block_k"] * c["sub"] <= MAX_PER_THREAD * 32 * c["num_warps"] for c in cfgs
        )
    assert len(down) > len(gate_up)  # gate/up's pairs of rows make its widest tiles too large
    assert list(tune4_candidates(4608, 3584, 96, Epilogue())) == []  # no tile is a whole number of groups


class _Clock:
    """A clock the test moves: each reading advances it by `tick` seconds."""

    def __init__(self, tick: float):
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_a_spent_budget_stops_refining_with_what_was_kept_so_far():
    from ferrylm.engine.tuning.choose import Budget

    configs = {key: {"block_n": 8, "runners_up": [{"block_n": 16}, {"block_n": 32}]} for key in "ab"}
    applied = dict(configs)
    costs = {"a": {8: 10.0, 16: 9.0, 32: 8.0}, "b": {8: 20.0, 16: 19.0, 32: 18.0}}
    # Each reading of the clock takes a second of a four-second budget: a's three options pass the check
    # (8, already applied, then 16 and 32), b's first does not.
    out = refine(
        configs,
        lambda key, cfg: applied.__setitem__(key, cfg),
        _step(applied, costs),
        budget=Budget(4.0, clock=_Clock(1.0)),
    )
    assert out["a"]["block_n"] == 32 and out["b"]["block_n"] == 8
    assert {key: cfg["block_n"] for key, cfg in applied.items()} == {"a": 32, "b": 8}  # the step as returned
    applied = dict(configs)  # no budget (the default) tries everything
    assert refine(configs, lambda key, cfg: applied.__setitem__(key, cfg), _step(applied, costs))["b"]["block_n"] == 32


def test_a_shape_met_after_the_budget_takes_its_first_candidate_marked_untimed():
    from ferrylm.engine.tuning.choose import Budget, untimed

    clock = _Clock(10.0)
    budget = Budget(15.0, clock=clock)
    assert budget.left() and not budget.left()  # 10 s in, then 20 s: spent
    first = untimed(tune4_candidates(3584, 3584, 128))
    assert first["untimed"] and first == {**next(iter(tune4_candidates(3584, 3584, 128))), "untimed": True}
    assert Budget(None).left()
