@inference @inference_noisy_neighbour @slo_5m
Feature: Inference holds while a training burst floods the cluster
  At night a burst of batch training jobs is submitted (the seed §5.4: a training burst took the inference service
  down). The burst asks for GPUs wherever they are free, the inference nodes included; the serving replicas must
  keep their GPUs — no replica evicted or preempted — and users must not notice, while the training jobs run on
  free GPUs or wait in their queue as its policy says. A burst the platform absorbs pages no one: the serving
  alerts stay quiet — a claim only while the monitoring is watching, else the drill is inconclusive.

  Scenario: A burst of low-priority training jobs is submitted under inference load
    Given the inference Deployment has all its replicas Ready
    And 4 users are sending completions to its endpoint
    When a burst of 8 low-priority training jobs of 4 GPUs each is submitted
    Then no serving replica is evicted or preempted within 5 minutes
    And the monitoring raises none of InferenceUnavailable, InferenceReplicasUnavailable, InferenceLatencyBurn or InferenceServingNothing
    And the monitoring raises no more distinct alerts than its budget
    And the burst's jobs run or wait in their queue, none failed
    And no more than 1% of requests fail under the burst
    And p99 latency stays within 2x the baseline under the burst
