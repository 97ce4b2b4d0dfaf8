"""Detection: the platform's own monitoring (a real Prometheus and Alertmanager) watching the cluster a drill
faults — how the run starts them and how they find the cluster's exporters."""
