"""The twin's Kubernetes-compatible API server."""
