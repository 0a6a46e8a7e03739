"""Error types shared by every layer; the CLI prints these without a traceback."""

from __future__ import annotations

from dataclasses import dataclass


class SlurmK8sError(Exception):
    """Base of every error the CLI reports as a clean message."""

    exit_code = 1


@dataclass(frozen=True, order=True)
class FieldError:
    """One problem in a profile, located by file position and field path."""

    line: int
    col: int
    path: str
    message: str

    def format(self, source: str) -> str:
        """Render as ``FILE:LINE:COL: path: message``, always one line (a control character in a
        message, from a value quoted in it, is shown escaped)."""
        where = f"{source}:{self.line}:{self.col}" if self.line else source
        text = f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"
        return text if text.isprintable() else "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class ProfileError(SlurmK8sError):
    """A profile that cannot be used; carries every problem found at once."""

    exit_code = 2

    def __init__(self, source: str, errors: list[FieldError]):
        self.source = source
        self.errors = sorted(set(errors))
        super().__init__("\n".join(e.format(source) for e in self.errors))


class UsageError(SlurmK8sError):
    """Bad command-line input (a value outside its allowed range, say)."""

    exit_code = 2


class OutputError(SlurmK8sError):
    """Writing output failed for a reason outside the command line: permissions, a full disk, a closed stream."""

    exit_code = 1


class ClusterError(SlurmK8sError):
    """A failure talking to a Kubernetes cluster, wrapped once at the kube boundary."""

    exit_code = 1


class ExecRefused(ClusterError):
    """The API server refused an exec itself (401, 403, 404): asking again will not help, so waits stop at once."""
