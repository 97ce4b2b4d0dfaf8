"""Interrupting `drills run` (issue 11, DESIGN §6): one trial per drill kind (SIGTERM or SIGINT twice), own twin.

SIGTERM goes once the drill's fault is injected; SIGINT too, followed by a second SIGINT while the run tears
down (the Ctrl-C an impatient operator adds). Every trial must exit 130, leave no journal entry open (so
`drills revert` finds nothing), write the scenario's record, tell the truth on the console, and leave the twin
as it was: nodes schedulable, uplinks up, the run Lease free, no fio or locust process. bench/signal_trials.py
runs the same trial many times, at random moments, under CPU load.
"""

from __future__ import annotations

import random
import signal

import pytest

from drills.profile.model import load_target
from tests.e2e.drill_helpers import records
from tests.e2e.interrupt_trial import DRILLS, run_trial

pytestmark = pytest.mark.slow


# Each drill kind once, the two signal paths alternating over the kinds (each path runs for two kinds, each kind
# for one path): every kind's revert and both signal paths stay in `make test`; the full kind × signal × moment
# matrix, many trials each under CPU load, is bench/signal_trials.py.
TRIALS = [(kind, *((signal.SIGTERM, "injected") if i % 2 == 0 else (signal.SIGINT, "twice")))
          for i, kind in enumerate(DRILLS)]  # accept's: tests/e2e/test_accept_interrupt.py


@pytest.mark.parametrize("kind, signum, moment", TRIALS,
                         ids=[f"{k}-{'SIGTERM' if m == 'injected' else 'SIGINT-twice'}" for k, _, m in TRIALS])
def test_an_interrupted_run_exits_130_with_everything_reverted(kind, signum, moment, twin_factory, tmp_path):
    for attempt in ("sig", "sig-again"):  # once more on a fresh twin when this worker woke too late to send it
        twin = twin_factory(scale=load_target(None).cluster.twin.scale)
        trial = run_trial(kind, signum, moment, tmp_path, attempt, twin=twin, rng=random.Random(f"{kind}-{moment}"),
                          timeout=120)
        if not trial.late:
            break
    assert not trial.missed, f"the run ended before the signal (late: {trial.late}): {trial.stdout[-800:]}"
    if moment == "twice":
        assert len(trial.sent) == 2, f"the second SIGINT came after the run ended: {trial.sent}"
    assert trial.ok, trial.describe() + "\n" + trial.stdout[-1500:] + trial.stderr[-1500:]
    (rec,) = records(tmp_path / trial.run_dir.name)
    assert rec["verdict"] == "fail" and rec["category"] == "interrupted", rec["reason"]
    assert rec["details"]["reverts"] and all(r["ok"] for r in rec["details"]["reverts"])
    assert "every fault injected so far was reverted" in trial.stderr
