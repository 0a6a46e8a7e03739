"""Errors raised while building or saving images."""

from slurmk8s.errors import SlurmK8sError


class ImageError(SlurmK8sError):
    """A build, resolve or save step failed; the message says which and shows the tool's output."""

    exit_code = 1
