"""The twin prints real training logs in the format its profile names, and the drills (log_format: auto)
read each one: a healthy node-loss drill PASSes in every format, and broken-resume FAILs with "resume failed"
in every format (`make test` runs one format each way, bench/matrix.py all of them). (Megatron is the twin's default format: its healthy pass is test_drill_node_loss.py's healthy
run; roce-no-pfc naming the rank on NET/Socket is in test_drill_network.py's defect test.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.twin.profile import PROFILES_DIR
from tests.e2e.drill_helpers import drills, records, write_profile
from tests.e2e.matrix import cases

pytestmark = pytest.mark.slow

FORMATS = ["megatron", "hf-trainer", "deepspeed", "lightning"]
SCALE = "600"
# The formats whose step lines show steps (or it/s), not samples, per second: the twin's step_time is 250 ms
STEPS_PER_S = ("hf-trainer", "lightning")


def _profiles(tmp_path: Path, log_format: str) -> str:
    """A twin profile (minimal, printing `log_format`) and a drills profile that runs it; returns the latter."""
    minimal = (PROFILES_DIR / "minimal.yaml").read_text()
    twin = minimal.replace("      log_format: megatron", f"      log_format: {log_format}")
    assert twin != minimal or log_format == "megatron"
    twin_path = write_profile(tmp_path / f"twin-{log_format}.yaml", twin)
    base = (Path(__file__).resolve().parents[2] / "drills/profile/twin.yaml").read_text()
    base = base.replace("    profile: minimal ", f"    profile: {twin_path} ", 1)
    if log_format in STEPS_PER_S:  # a site declares its job's nominal in the unit its log shows (steps, not samples)
        nominal = "training_throughput: {value: 256, unit: samples/s, min_ratio: 0.8}"
        assert nominal in base
        base = base.replace(nominal, "training_throughput: {value: 4, unit: steps/s, min_ratio: 0.8}")
    return write_profile(tmp_path / f"drills-{log_format}.yaml", base)


# `make test`: one format each way (the parsers read every format in tests/unit/test_twin_log_shapes.py and
# test_logformats.py); bench/matrix.py: every format both ways. Megatron's healthy run is the default's.
@pytest.mark.parametrize("log_format", cases(["hf-trainer"], [f for f in FORMATS if f != "megatron"]))
def test_healthy_twin_passes_the_node_loss_drill_in_every_log_format(log_format, tmp_path):
    done = drills("run", "--profile", _profiles(tmp_path, log_format), "-m", "training", "-k", "drain",
                  "--scale", SCALE, "--no-html", "--reports", str(tmp_path / "r"), "--run-id", log_format)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (rec,) = records(tmp_path / "r" / log_format)
    assert rec["verdict"] == "pass", rec["reason"]
    assert rec["details"]["resumed_step"] == rec["details"]["latest_checkpoint"]


@pytest.mark.parametrize("log_format", cases(["deepspeed"], FORMATS))
def test_broken_resume_fails_naming_the_failed_resume_in_every_log_format(log_format, tmp_path):
    done = drills("run", "--profile", _profiles(tmp_path, log_format), "-m", "training", "-k", "drain",
                  "--defect", "broken-resume", "--scale", SCALE, "--no-html", "--reports", str(tmp_path / "r"),
                  "--run-id", log_format)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    (rec,) = records(tmp_path / "r" / log_format)
    assert rec["verdict"] == "fail" and "resume failed" in rec["reason"] and "UnpicklingError" in rec["reason"], \
        rec["reason"]



# `make test`: DeepSpeed, the framework that warns and trains on; bench/matrix.py adds the formats that crash
# (Megatron, Lightning: the same failed resume as broken-resume). The HF Trainer skips a missing optimizer.pt
# silently, so its log is a good resume's: no log-based check can fail it (the defect's description says so).
@pytest.mark.parametrize("log_format", cases(["deepspeed"], ["deepspeed", "megatron", "lightning"]))
def test_a_checkpoint_without_its_optimizer_state_fails_the_resume(log_format, tmp_path):
    done = drills("run", "--profile", _profiles(tmp_path, log_format), "-m", "training", "-k", "drain",
                  "--defect", "lost-optimizer-state", "--scale", SCALE, "--no-html", "--reports",
                  str(tmp_path / "r"), "--run-id", log_format)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    (rec,) = records(tmp_path / "r" / log_format)
    assert rec["verdict"] == "fail" and "resume failed" in rec["reason"], rec["reason"]
    if log_format == "deepspeed":
        assert "zero_pp_rank_0_mp_rank_00_optim_states.pt" in rec["reason"], rec["reason"]
