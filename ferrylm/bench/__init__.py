"""`ferrylm bench`: the optimization report on the user's own hardware.

Short measured trials of the training strategies that apply here (strategies.py) on the config's
model, each a real train stage in its own process (trials.py) on the data stage's rows or seeded
random tokens (rows.py); then batch-1 decoding of every artifact the export stage's record lists
(decode.py). Writes `<run>/bench/bench.{json,md,html}` (report.py) and its record; a trial that
fails or does not fit is a row with its reason. `load` probes a served endpoint with load and bad
input (the end-to-end test and benchmarks/serve_load.py).
"""

from .stage import run_bench

__all__ = ["run_bench"]
