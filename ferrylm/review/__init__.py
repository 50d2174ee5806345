"""Review: people judge a seeded sample of what the eval stage generated, blind, side by side, on a
small web app bound to loopback; their votes become the report's "Human-judged correctness" and the
seed's "人工评估 > 80%" criterion (`human_correct`).

    ferrylm review --config C          # serve the page for C's run; votes go to <run>/review/votes.sqlite
    ferrylm review --invite alice,bob --host 0.0.0.0   # one link per reviewer; a vote is its link's reviewer's
    ferrylm report --config C          # re-write the eval report with the votes so far (nothing re-generated)
"""

from .stage import human_verdict, run_review, url

__all__ = ["human_verdict", "run_review", "url"]
