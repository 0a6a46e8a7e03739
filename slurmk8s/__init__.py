"""slurmk8s: Slinky-style Slurm on Kubernetes from one cluster profile."""

__version__ = "0.1.0"
