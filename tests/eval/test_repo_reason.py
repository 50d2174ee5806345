"""A failed run's one line names what a person acts on, in each build tool's words."""

from ferrylm.eval.repo.reason import first_error

CARGO_OFFLINE = """error: no matching package named `unicode-segmentation` found
location searched: crates.io index
required by package `heck v0.4.0 (/tmp/heck)`
As a reminder, you're using offline mode (--offline) which can sometimes cause surprising resolution failures
"""
RUSTC = """   Compiling guard v0.1.0 (/tmp/r)
error[E0277]: the trait bound `T: Default` is not satisfied
  --> src/lib.rs:12:9
error: could not compile `guard` (lib) due to 1 previous error
"""


def test_cargo_s_and_rustc_s_own_error_lines_lead():
    assert first_error(CARGO_OFFLINE).startswith("error: no matching package named `unicode-segmentation` found")
    assert first_error(RUSTC).startswith("error[E0277]: the trait bound `T: Default` is not satisfied")
