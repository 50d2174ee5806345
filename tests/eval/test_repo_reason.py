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


PYTEST_DOCSTRING = """F                                                                        [100%]
=================================== FAILURES ===================================
    def from_match(m):
        \"\"\"A sizing sequence from its match.

        :raises ValueError: When ``control_codes='strict'`` for unrecognized input.
        \"\"\"
>       return int(m.group(1))
E       TypeError: int() argument must be a string, not 'NoneType'

wcwidth/text_sizing.py:88: TypeError
=========================== short test summary info ============================
FAILED tests/test_text_sizing.py::test_width[params0] - TypeError: int() argument must be a string, not 'NoneType'
26 failed, 1693 passed, 48 skipped in 5.21s
    assert width('\\x1b]8;id=1;http://example.com\\x1b\\\\gh') == 2
"""
JUNIT = """.E
Time: 0.01
There was 1 failure:
1) testParse(jargs.test.gnu.CmdLineParserTestCase)
junit.framework.AssertionFailedError: expected:<1> but was:<2>
\tat jargs.test.gnu.CmdLineParserTestCase.testParse(CmdLineParserTestCase.java:40)
FAILURES!!!
Tests run: 12,  Failures: 1
"""


def test_the_error_is_a_line_that_begins_with_it_not_a_docstring_a_traceback_shows():
    line = first_error(PYTEST_DOCSTRING)
    assert line.startswith("TypeError: int() argument must be a string, not 'NoneType'"), line
    assert "first failed: tests/test_text_sizing.py::test_width[params0]" in line
    assert line.endswith("26 failed, 1693 passed, 48 skipped in 5.21s")  # the summary, not a source line after it
    assert "\x1b" not in first_error("E   AssertionError: \x1b]8;id=1;http://x\x1b\\link\x1b]8;;\x1b\\ differs")


def test_java_s_dotted_exception_still_leads():
    assert first_error(JUNIT).startswith("junit.framework.AssertionFailedError: expected:<1> but was:<2>")
