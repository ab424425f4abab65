"Every notebook runs top to bottom in a fresh kernel under nbdev_test (their own asserts are the checks)."
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.notebooks
def test_all_notebooks_run():
    r = subprocess.run(["nbdev_test", "--n_workers", "2", "--timing"], cwd=ROOT, capture_output=True, text=True)
    print(r.stdout)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
