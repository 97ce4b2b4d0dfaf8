@inference @inference_rolling_restart @slo_10m
Feature: Inference survives a rolling restart under load
  Periodic rolling restarts of the inference service are standard practice (a new image, a config change, a
  memory leak kept in check; the seed §5.3), so users must not notice one. `kubectl rollout restart` replaces
  every replica of the vLLM Deployment while users send completions: each old pod must go only once a new one
  serves, each pod must drain what it is serving before it stops, and the rollout must finish. Every replica is
  replaced (judged by pod uid), no request fails, and p99 latency stays within twice its usual value. A planned
  restart on a healthy platform pages no one: the serving alerts stay quiet — a claim only while the monitoring is
  watching (its rules evaluated over series it scrapes), else the drill is inconclusive.

  Scenario: Restart every replica of the serving Deployment under load
    Given the inference Deployment has all its replicas Ready
    And 4 users are sending completions to its endpoint
    When the Deployment is restarted as `kubectl rollout restart` does
    Then the rollout completes within 10 minutes
    And every replica is replaced by a new pod that is Ready, in the Service and serving
    And no more than 0 replicas are unavailable at any moment of the rollout
    And the monitoring raises none of InferenceUnavailable, InferenceReplicasUnavailable, InferenceLatencyBurn or InferenceServingNothing
    And the monitoring raises no more distinct alerts than its budget
    And no more than 0% of requests fail during the rollout
    And p99 latency stays within 2x the baseline during the rollout
