"""Is a difference between two models on the same tasks real? Paired tests over per-task outcomes.

11/164 against 10/164 passed says nothing by itself: what matters is how many tasks one model
solved that the other did not. With one sample per task the outcomes are 0/1 and McNemar's exact
test applies (a two-sided binomial test on the discordant tasks); with several, a paired bootstrap
of the mean per-task difference gives the interval.
"""

from __future__ import annotations

from math import comb


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact p-value for `only_a` vs `only_b` discordant pairs under no difference."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)


# A pass/fail comparison whose size cannot show a difference under this (as a share of tasks) says
# "too few to tell", not "no significant change": 8 tasks can show only a 75-point one.
TOO_FEW = 0.5


def smallest_significant(tasks: int, alpha: float = 0.05) -> float:
    """The smallest Pass@1 difference `tasks` paired tasks can show by McNemar's test: k/tasks for the
    fewest discordant tasks k, all one way, with p < alpha (k = 6 at 5 %); 1.0 beyond reach (under 6 tasks)."""
    k = next((k for k in range(1, tasks + 1) if mcnemar_exact(k, 0) < alpha), None)
    return k / tasks if k else 1.0


def bootstrap_interval(
    diffs: list[float], iters: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of the mean of `diffs`, resampling examples with replacement (seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = np.asarray(diffs, dtype=float)
    n = len(x)
    means = np.concatenate(
        [x[rng.integers(0, n, size=(min(1000, iters - k), n))].mean(axis=1) for k in range(0, iters, 1000)]
    )
    means.sort()
    lo = means[int((1 - level) / 2 * iters)]
    hi = means[min(iters - 1, int((1 + level) / 2 * iters))]
    return float(lo), float(hi)


# Fewer paired examples than this are no test by bootstrap: its interval of 1 example is a point, and even
# 5 differences of one sign would not be significant by a sign test (two-sided p = 2 * 0.5**5 = 0.0625).
MIN_BOOTSTRAP = 6


def compare(a: dict[str, float], b: dict[str, float], alpha: float = 0.05) -> dict:
    """Per-task pass rates of two models (task → fraction passed) on their shared tasks."""
    tasks = sorted(set(a) & set(b))
    if not tasks:
        return {"tasks": 0}
    diffs = [a[t] - b[t] for t in tasks]
    lo, hi = bootstrap_interval(diffs)
    out = {
        "tasks": len(tasks),
        "a": sum(a[t] for t in tasks) / len(tasks),
        "b": sum(b[t] for t in tasks) / len(tasks),
        "difference": sum(diffs) / len(tasks),
        "ci95": [lo, hi],
    }
    if all(a[t] in (0, 1) and b[t] in (0, 1) for t in tasks):
        only_a = sum(1 for t in tasks if a[t] > b[t])
        only_b = sum(1 for t in tasks if b[t] > a[t])
        out.update(only_a=only_a, only_b=only_b, test="McNemar exact", p=mcnemar_exact(only_a, only_b))
        out["significant"] = out["p"] < alpha
        out["smallest_significant"] = smallest_significant(len(tasks), alpha)
        out["too_few"] = not out["significant"] and out["smallest_significant"] > TOO_FEW
    else:
        too_few = len(tasks) < MIN_BOOTSTRAP
        out.update(test="paired bootstrap", significant=not too_few and not lo <= 0 <= hi, too_few=too_few)
    return out


def sentence(c: dict, a: str = "fine-tuned", b: str = "base") -> str:
    """One line a reader can act on."""
    if not c.get("tasks"):
        return "no shared tasks to compare"
    lo, hi = c["ci95"]
    head = (
        f"Pass@1 {a} {c['a']:.3f} vs {b} {c['b']:.3f} on {c['tasks']} tasks: difference {c['difference']:+.3f} "
        f"(95% interval {lo:+.3f} to {hi:+.3f})"
    )
    if c["test"] == "McNemar exact":
        head += f"; solved by only one: {c['only_a']} {a}, {c['only_b']} {b}; McNemar exact p = {c['p']:.3g}"
    verdict = (
        "a real difference at the 5% level"
        if c["significant"]
        else f"too few tasks to tell (the smallest difference {c['tasks']} can show: {c['smallest_significant']:.2f})"
        if c.get("too_few")
        else "not a significant difference (could be chance)"
    )
    return f"{head} — {verdict}"
