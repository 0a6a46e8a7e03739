"""Errors raised by the pod lab."""

from slurmk8s.errors import SlurmK8sError


class LabError(SlurmK8sError):
    """A lab step failed (a daemon died, a wait ran out); the message is meant for a person."""

    exit_code = 1


class LabUnavailable(LabError):
    """The lab cannot run on this machine or for this bundle (not root, no namespaces, no Slurm build)."""

    exit_code = 2
