@inference @inference_pod_kill @slo_5m
Feature: Inference survives the loss of serving replicas
  Replicas of the vLLM inference Deployment are killed while users send completions. The ReplicaSet
  must bring up new pods that are scheduled and Ready, the endpoint must serve again within 5 minutes,
  and while a replica serves, users must see almost no errors and no more than twice the usual p99
  latency: the survivors carry the load (DESIGN §1; the seed's inference drill). Draining nodes for
  maintenance is a voluntary disruption: the Deployment's PodDisruptionBudget must pace the evictions
  so that a replica always serves, and users see no outage at all; a replica of a cordoned node must find
  a GPU elsewhere, preempting lower-priority work when the cluster is full. The platform's own monitoring
  must tell its on-call within a minute — a warning when replicas are lost while others serve
  (InferenceReplicasUnavailable), a page when none is left (InferenceUnavailable) — and let it go once the
  replicas are back.

  Scenario Outline: The inference Deployment loses <killed> under load
    Given the inference Deployment has all its replicas Ready
    And 4 users are sending completions to its endpoint
    When <killed> are killed
    Then the endpoint serves again within 5 minutes
    And every failed request is an honest HTTP error: no 200 with an error payload, no hung request
    And the killed pods are replaced by pods that are Ready, in the Service and serving
    And the Deployment is back to its desired Ready replicas
    And no more than 1% of requests fail while a replica serves
    And p99 latency stays within 2x the baseline while a replica serves
    And the monitoring raises <alert> within 1 minute
    And it resolves after recovery
    And the monitoring raises no more distinct alerts than its budget

    # Tagged by size (`-m kill_one`). A size beyond the site's faults.inference.max_kill is skipped, naming it:
    # killing every replica is a full outage, a site's decision. The alert is the on-call's: replicas lost with
    # survivors serving is a warning (one more loss is an outage); no replica left is a page.
    @kill_one
    Examples: one replica
      | killed              | alert                        |
      | 1 of its 2 replicas | InferenceReplicasUnavailable |

    @kill_all
    Examples: every replica
      | killed              | alert                        |
      | all its replicas    | InferenceUnavailable         |

  Scenario: Evict every replica as a node drain does, under load
    Given the inference Deployment has all its replicas Ready
    And 4 users are sending completions to its endpoint
    When its replicas are evicted one after another, as a node drain evicts them
    Then the endpoint serves again within 5 minutes
    And no more than 1% of requests fail while the node drains
    And the killed pods are replaced by pods that are Ready, in the Service and serving
    And the Deployment is back to its desired Ready replicas

  Scenario: Cordon and drain the GPU node serving a replica, under load
    Given the inference Deployment has all its replicas Ready
    And 4 users are sending completions to its endpoint
    When the GPU node serving most of its replicas is cordoned and drained
    Then the endpoint serves again within 5 minutes
    And no more than 1% of requests fail while the node drains
    And the killed pods are replaced by pods that are Ready, in the Service and serving
    And the Deployment is back to its desired Ready replicas
