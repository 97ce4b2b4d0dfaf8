@storage @storage_saturation
Feature: Checkpoint I/O holds while the checkpoint store is saturated
  Someone floods the shared file system and checkpoint saves go from minutes to tens of minutes
  (seed pitfall 5.5). fio saturates the checkpoint store; a checkpoint written under that load must
  read back intact and save within twice its own baseline (and storage.probe_save_limit_s when set),
  the training job's own checkpoint saves must stay within twice theirs, and the store must deliver
  its declared bandwidth (storage.bandwidth_target_mb_s). A site may override the 2x by setting
  slo.checkpoint_save_ratio in its profile. The platform's own monitoring must tell its on-call that the store is
  flooded within a minute (CheckpointStoreSaturated, from the store's NFS clients) and let it go once the flood stops.

  Scenario: Saturate the checkpoint store with fio under the fine-tuning job
    Given the training job is running on at least 2 nodes
    And it has saved a checkpoint
    And a checkpoint probe of the store gives a baseline
    When the checkpoint store is saturated with fio
    Then a checkpoint written under saturation reads back intact
    And its save time stays within 2x its baseline
    And the training job's checkpoint saves stay within 2x their baseline
    And the monitoring raises CheckpointStoreSaturated within 1 minute
    And it resolves after the flood stops
    And the monitoring raises no more distinct alerts than its budget
    And the store delivers its declared bandwidth under fio and the probe
