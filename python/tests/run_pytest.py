"""Runs pytest on the given files; exits 77 (meson: skipped) when pytest is not installed."""
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed (apt-get install python3-pytest): skipped")
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
