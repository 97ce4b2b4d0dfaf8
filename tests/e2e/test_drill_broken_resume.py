"""Defect broken-resume: the restarted job attempts to load its checkpoint and crashes; the node-loss drill
must FAIL naming the failed resume (an attempt is never a resume)."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_broken_resume_fails_the_node_loss_drill_naming_the_failed_resume(tmp_path):
    run = subprocess.run([sys.executable, "-m", "drills.cli", "run", "-m", "training", "-k", "cordon-drain",
                          "--defect", "broken-resume", "--no-html", "--reports", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert "gpu-node-loss: FAIL" in out, out[-3000:]
    assert "resume failed" in out and "UnpicklingError" in out, out[-3000:]
