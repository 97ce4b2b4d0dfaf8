@network @switch_uplink @slo_15m
Feature: Training survives the loss of a leaf uplink
  One uplink of a leaf switch carrying a multi-node fine-tuning job is shut over SSH. The uplink must
  have carried the job's traffic (the switch's counters say so; an idle uplink proves nothing and the
  drill is inconclusive). NCCL must keep RDMA through the drill and a stability window after it (never
  fall back to NET/Socket, which silently makes multi-node training slower than one node),
  the job must reroute over the leaf's other uplinks — or, if an NCCL timeout kills it, restart from
  its latest checkpoint — and training throughput must be back to 90 % of its baseline, sustained,
  within 15 minutes (DESIGN §1); through the stability window its loss stays finite, no worker container
  fails or restarts, and no error line the drills cannot read goes unexplained. The platform's own monitoring
  must tell its on-call that a link carrying traffic went down (FabricLinkDown, from the switches' SNMP
  interface table) within a minute, and let it go once the drill brings the link back.

  Scenario: Drop one uplink of the leaf carrying the fine-tuning job
    Given the training job runs on at least 2 nodes with a steady throughput
    When one uplink of the leaf carrying the job is shut over SSH
    Then the uplink carried the job's traffic until it was shut
    And NCCL keeps RDMA and never falls back to sockets
    And the job reroutes around the failed uplink or restarts from its latest checkpoint
    And throughput recovers within 15 minutes
    And throughput is back to at least 90 % of its baseline
    And the job stays healthy through the stability window: finite loss, no failed worker container, no unknown error line
    And the monitoring raises FabricLinkDown within 1 minute
    When the shut uplink is brought back up
    Then it resolves after recovery
    And the monitoring raises no more distinct alerts than its budget

  Scenario Outline: Drop an uplink of the <dialect> leaf over an SSH <transport> session
    Given the switch inventory has a <dialect> leaf
    And the training job runs on at least 2 nodes with a steady throughput
    When one uplink of the <dialect> leaf carrying the job is shut over an SSH <transport> session
    Then the uplink carried the job's traffic until it was shut
    And NCCL keeps RDMA and never falls back to sockets
    And the job reroutes around the failed uplink or restarts from its latest checkpoint
    And throughput recovers within 15 minutes
    And throughput is back to at least 90 % of its baseline
    And the job stays healthy through the stability window: finite loss, no failed worker container, no unknown error line
    And the monitoring raises FabricLinkDown within 1 minute
    When the shut uplink is brought back up
    Then it resolves after recovery
    And the monitoring raises no more distinct alerts than its budget

    # One block per switch OS, tagged with it (`-m eos`). An Example whose OS no switch in the inventory
    # speaks is skipped, naming it; the twin's `fabric-dialects` profile has a leaf of each under the job.
    @sonic
    Examples: SONiC
      | dialect | transport |
      | sonic   | exec      |
      | sonic   | shell     |

    @nxos
    Examples: NX-OS
      | dialect | transport |
      | nxos    | shell     |
      | nxos    | exec      |

    @eos
    Examples: EOS
      | dialect | transport |
      | eos     | shell     |
      | eos     | exec      |

    @cumulus
    Examples: Cumulus NVUE
      | dialect | transport |
      | cumulus | shell     |
      | cumulus | exec      |

    @onyx
    Examples: Onyx
      | dialect | transport |
      | onyx    | shell     |
