"""Pre-expansion acceptance (`drills accept`): new GPU nodes earn their place in the pool with a go/no-go
per node and per check.

    plan.py       which nodes (names or a label selector), which checks, each node's expectation, the reference
                  node and whether it is fit (Ready, untainted, accepted, another leaf); safety checks
    catalogue.py  the product catalogue (catalogue.yaml: GPUs and servers, every figure's source) → expectations
    jobs.py       one batch/v1 Job per (node, check), pinned to the node, from the profile's images/commands
    judge.py      each check's tool output (drills/measure/accept parsers) against its thresholds and expectation
    identity.py   evidence bound to its node: spec.nodeName, tool host names, GPU UUIDs, NIC GUIDs, the store's mount,
                  the machine's systemUUID/machineID against every Node object, a leaf port no other node names
    exits.py      a GO stands only on a pod that Succeeded with exit code 0 (a tool that failed proves nothing)
    freshness.py  each node read again before its verdict stands and before the gate lifts (rebooted, GPUs
                  re-registered, relabelled, not Ready, in use since the plan → `changed`)
    plausible.py  every measured value against the physical limit of what it measured (catalogue)
    coverage.py   evidence covers the whole node (all GPUs, all NICs)
    policy.py     required checks and levels, explicit waivers; a required check without a result is not_run, and
                  a node of which nothing was observed is no GO whatever is waived
    switch.py     the leaf port facing a node on every dialect: up, speed, MTU, errors, PFC and ECN on RoCE
    port_facts.py the dialects' port views (data) read into typed facts
    run.py        the run: gate taint → phases of Jobs → judges → untaint the passing nodes; always reverts
    report.py     records.jsonl, the go/no-go table with sign-off (not run, waivers), raw outputs and expectations
                  with their sources as Allure attachments/parameters, the NCCL pair heat map

The safety contract is the drills' one: allowlist and blast radius before anything changes, journal
entries (drills/faults/accept_gate.py, drills/faults/accept_jobs.py) fsynced before the taint and the
Jobs, revert on pass, failure, exception, SIGINT and SIGTERM, `drills revert` after a SIGKILL, dry run.
"""
