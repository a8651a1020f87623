"""Every Python snippet in docs/integration.md's Python section runs as it stands."""

import re
import subprocess
import sys

import pytest

from conftest import REPO

DOC = REPO / "docs" / "integration.md"
SECTION = "## The Python package"


def snippets():
    text = DOC.read_text()
    assert SECTION in text, f"{DOC} has no `{SECTION}` section"
    section = text.split(SECTION, 1)[1]
    section = re.split(r"\n## ", section, maxsplit=1)[0]
    found = []
    heading = "intro"
    for block in re.finditer(r"^(#{3,4} [^\n]+)$|^```python\n(.*?)^```$", section, re.M | re.S):
        if block.group(1):
            heading = block.group(1).lstrip("# ").strip()
        else:
            found.append(pytest.param(block.group(2), id=heading))
    assert len(found) >= 7, "a snippet per core topic and per adapter"
    return found


@pytest.mark.parametrize("code", snippets())
def test_the_snippet_runs(code):
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
