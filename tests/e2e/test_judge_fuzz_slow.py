"""The slow tier of tests/unit/test_judge_fuzz.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit import test_judge_fuzz as _judge_fuzz
from tests.unit.test_judge_fuzz import (
    ROOT,
)

# Fixtures of the fast tier's module, shared here.
workdir = _judge_fuzz.workdir


@pytest.mark.e2e  # waits out timers or runs processes: the slow tier
def test_the_judge_never_raises_and_stays_within_its_budget(workdir: Path) -> None:
    """Measured in a process of its own, as `clawgate serve` runs the judge: its start-up
    objects frozen out of the collector, not the heap of the whole test suite."""
    code = (
        "import gc, sys; from pathlib import Path; "
        "from tests.unit.test_judge_fuzz import judge_all; "
        "gc.collect(); gc.freeze(); judge_all(Path(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(workdir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "judged 5000 commands" in done.stdout
