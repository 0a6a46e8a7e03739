"""Kubernetes object builders: plain dicts, one module per component."""
