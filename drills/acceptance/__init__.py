"""Pre-expansion acceptance (`drills accept`): new GPU nodes earn their place in the pool with a go/no-go
per node and per check.

    plan.py    which nodes (names or a label selector), which checks, the reference node; safety checks
    jobs.py    one batch/v1 Job per (node, check), pinned to the node, from the profile's images/commands
    judge.py   each check's tool output (drills/measure/accept parsers) against its thresholds
    switch.py  the leaf port facing a node, over the switch sessions: up, speed, MTU, PFC on RoCE
    run.py     the run: gate taint → phases of Jobs → judges → untaint the passing nodes; always reverts
    report.py  records.jsonl, the per-node go/no-go table (summary.md/html) and the NCCL pair heat map

The safety contract is the drills' one: allowlist and blast radius before anything changes, journal
entries (drills/faults/accept_gate.py, drills/faults/accept_jobs.py) fsynced before the taint and the
Jobs, revert on pass, failure, exception, SIGINT and SIGTERM, `drills revert` after a SIGKILL, dry run.
"""
