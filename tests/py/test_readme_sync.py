# README.md shows the pytest and Node examples verbatim; this keeps them from drifting apart.
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_examples_are_the_tested_files():
    readme = (ROOT / "README.md").read_text()
    for example in ["tests/py/test_readme_fixture.py", "tests/node/limiter.test.mjs"]:
        assert (ROOT / example).read_text() in readme, f"{example} differs from README.md"
