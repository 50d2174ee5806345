"""The one base class of ferrylm's expected failures.

The CLI catches `FerryError` once and prints its one line (exit code `exit_code`); this module
imports nothing, so an error path never waits for torch to load.
"""


class FerryError(Exception):
    """An expected failure worded as one line: a bad config value, a missing path, a busy port, ..."""

    exit_code = 2
