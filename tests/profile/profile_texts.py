"""Profile texts the profile tests edit: one minimal valid cluster, one pool."""

BASE = """\
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata:
  name: demo
spec:
  pools:
    - name: cpu
      replicas: 1
      cpus: 2
      memory: 2Gi
"""
