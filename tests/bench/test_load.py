"""The concurrency sweep's bookkeeping (ferrylm/bench/load.py), which studies/serving_a_team/serve_team.py reports from a GPU:
percentiles are measured values, aggregate throughput is over the level's wall time, and each level's
requests are sent together."""

import threading
import time

from ferrylm.bench.load import percentile, summarize, sweep


def test_percentiles_are_nearest_rank_values_that_were_measured():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50.0, 99.0, 100.0)
    eight = [0.1, 0.9, 0.3, 0.2, 0.5, 0.4, 0.8, 0.7]
    assert percentile(eight, 50) == 0.4 and percentile(eight, 99) == 0.9  # of 8, the p99 is the slowest
    assert percentile([2.0], 99) == 2.0


def test_a_level_s_summary_counts_tokens_over_its_wall_time():
    runs = [{"ttft_s": 0.1 * i, "total_s": 1.0 + i, "tokens": 512} for i in range(4)]
    got = summarize(runs, wall_s=4.0)
    assert got == {
        "requests": 4,
        "wall_s": 4.0,
        "aggregate_tokens_per_s": 512.0,
        "ttft_p50_s": 0.1,
        "ttft_p99_s": 0.30000000000000004,
        "total_p50_s": 2.0,
        "total_p99_s": 4.0,
    }


def test_a_sweep_sends_each_level_s_requests_together():
    inside, most, lock = [0], [0], threading.Lock()

    def request():
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.2)
        with lock:
            inside[0] -= 1
        return {"ttft_s": 0.01, "total_s": 0.2, "tokens": 8}

    rows = sweep(request, [1, 4])
    assert [r["concurrency"] for r in rows] == [1, 4] and [r["requests"] for r in rows] == [1, 4]
    assert most[0] == 4  # the four of the second level were in flight at once
    assert rows[1]["wall_s"] < 0.2 * 4  # together, not one after the other
