Feature: Pre-expansion acceptance of new GPU nodes
  A new GPU node joins the pool on evidence about that very node only: each check runs as a Job pinned to
  the node, its output is bound to the node (spec.nodeName, the tool's host names, GPU UUIDs, NIC GUIDs)
  and judged against what the node's product is (the catalogue, or an explicit profile override), never
  against what the node says about itself. One check after another (each wants the node's GPUs to itself);
  every planned node runs a check at once. `drills accept` fills each `| node |` table with the nodes it
  planned and keeps the runbook it ran in the run's folder (runbook/).

  Scenario Outline: GPUs — a pod on the node sees the GPUs its product has (nvidia-smi)
    Given <node> is planned for acceptance
    When the gpu check has run on every planned node
    Then the gpu check of <node> is a go

    Examples: planned nodes
      | node |

  Scenario Outline: DCGM diagnostic — no test fails, at the level the policy requires (dcgmi diag)
    Given <node> is planned for acceptance
    When the dcgm check has run on every planned node
    Then the dcgm check of <node> is a go

    Examples: planned nodes
      | node |

  Scenario Outline: Burn-in — every GPU computes right, fast and below its thermal limit (gpu-burn)
    Given <node> is planned for acceptance
    When the burn check has run on every planned node
    Then the burn check of <node> is a go

    Examples: planned nodes
      | node |

  Scenario Outline: NVLink — all-reduce inside the node over all its GPUs (all_reduce_perf)
    Given <node> is planned for acceptance
    When the nccl-node check has run on every planned node
    Then the nccl-node check of <node> is a go

    Examples: planned nodes
      | node |

  Scenario Outline: RDMA — every compute NIC up at its rate, each rail at its bandwidth (ibstat, ib_write_bw)
    Given <node> is planned for acceptance
    When the rdma check has run on every planned node
    Then the rdma check of <node> is a go

    Examples: planned nodes
      | node |

  Scenario Outline: Network path — all-reduce with a known-good node outside the batch over IB/RoCE (all_reduce_perf)
    Given <node> is planned for acceptance
    When the nccl-pair check has run on every planned node
    Then the nccl-pair check of <node> is a go

    Examples: planned nodes
      | node |

  Scenario Outline: Shared store — the node reads and writes the mounted store at its target (fio)
    Given <node> is planned for acceptance
    When the storage check has run on every planned node
    Then the storage check of <node> is a go

    Examples: planned nodes
      | node |

  Scenario Outline: Switch port — the leaf port facing the node is up, at speed and MTU, PFC and ECN on RoCE
    Given <node> is planned for acceptance
    When the switch-port check has run on every planned node
    Then the switch-port check of <node> is a go

    Examples: planned nodes
      | node |

  Scenario: Identity — no GPU or NIC is seen on two nodes, nor on a node accepted before
    When the evidence of every planned node has been cross-checked
    Then no planned node's evidence belongs to another node

  Scenario Outline: Required checks — every check the policy requires ran on the node, or is waived
    Given <node> is planned for acceptance
    When the policy's required checks have been counted
    Then every required check of <node> has a result

    Examples: planned nodes
      | node |

  Scenario: Shared store, all new nodes at once — their reads add up to the store's aggregate target
    When the new nodes' reads of the shared store have been added up
    Then their aggregate read rate meets the target

  Scenario Outline: Sign-off — the node joins the pool only when every required check is a go or waived
    Given <node> is planned for acceptance
    When every check and batch step has run
    Then <node> may join the pool

    Examples: planned nodes
      | node |
