"""Detection: the platform's own monitoring (Prometheus + Alertmanager) must see every fault a drill injects."""
