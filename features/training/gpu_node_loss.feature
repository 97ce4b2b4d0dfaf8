@training @gpu_node_loss @slo_15m
Feature: Training survives the loss of a GPU node
  A GPU node under a running fine-tuning job is lost. The Volcano job must be rescheduled onto other
  nodes, resume from the latest checkpoint it saved, lose at most one checkpoint interval of progress,
  and be training again within 15 minutes (DESIGN §1; MegaScale: back to pre-crash progress ≤ 15 min).

  Scenario Outline: Lose a GPU node under the fine-tuning job by <fault>
    Given the training job is running on at least 2 nodes
    And it has saved a checkpoint
    When one GPU node running the job is lost by <fault>
    Then the job leaves the lost node and is rescheduled
    And it resumes from its latest checkpoint
    And no more than 2000 steps are lost
    And training recovers within 15 minutes

    Examples:
      | fault           |
      | cordon-drain    |
      | taint-noexecute |
      | gpu-unhealthy   |
