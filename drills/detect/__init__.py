"""Detection: the platform's own monitoring (a real Prometheus and Alertmanager) must see every fault a drill
injects — how the run starts them, how they find the cluster's exporters, the rule pack, the judges."""
