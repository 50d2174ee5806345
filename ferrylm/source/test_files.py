"""Which files of a repository are its tests, by path, in the five languages."""

from __future__ import annotations

import os
import re

# test directories; Python's test_*.py and *_test.py, Go's *_test.go, Java's *Test(s).java and Test*.java,
# C++'s test_*.cc and *_test(s).cc (and .cpp, .cxx)
TEST_FILE = re.compile(
    r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*\.(?:py|cc|cpp|cxx)$|_test\.(?:py|go)$"
    r"|_tests?\.(?:cc|cpp|cxx)$|Tests?\.java$|(?:^|/)Test[^/]*\.java$"
)


def is_test_file(path_in_repo: str) -> bool:
    return bool(TEST_FILE.search(path_in_repo.replace(os.sep, "/")))
