"""Every framework logs step k before it saves k (the HF Trainer's `_maybe_log_save_evaluate` logs, then saves;
Megatron's training_log runs before save_checkpoint). The twin printed step k's line after the save line, and for
the frameworks whose only completion evidence is the loop stepping past a save (HF, Lightning, mmengine), that line
read as the save having completed: a worker lost mid-save left a "saved" checkpoint its store never completed — a
healthy twin FAILed "reports checkpoint 9000 saved but the store holds it incomplete" (seen with five test workers on
2 cores, when the node loss landed in a save)."""

from __future__ import annotations

from drills.measure.logread import LogReader
from drills.twin.workloads.training_job import Output
from drills.twin.workloads.trainlogs import for_format
from tests.unit.jobsim_helpers import running_job


def test_a_save_still_being_written_is_not_read_as_saved(tmp_path):
    sim, _truth, _ = running_job(tmp_path)
    sim.fmt = for_format("hf-trainer")  # the Trainer's lines: a save is complete once the loop logs again
    out, t = Output(), sim.progress.t
    # up to the moment a save has begun and is still being written, of a step whose line the job prints
    while not (sim.saves and (sim.saves[0][0] % sim.filter.every == 0 or sim.saves[0][0] in sim.filter.forced)):
        t += 1.0
        sim.advance(t, out)
    saving = sim.saves[0][0]
    reader = LogReader()
    saved = [e.step for _, _, texts in sorted(out.lines, key=lambda line: line[0])
             for text in ([texts] if isinstance(texts, str) else texts) for e in reader.feed(text)
             if e.kind == "checkpoint_saved"]
    assert saving not in saved, (saving, saved)
