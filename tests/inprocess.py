"""`slurmk8s ARGS` run in this process through cli.main, answered as subprocess.run answers (a test helper).

A new interpreter costs a test about half a second of CPU (a cluster command imports the
`kubernetes` client), so tests that are not about the process boundary run the console script's
entry point here instead: the same argv, environment, working directory, standard input (empty
unless given, and nothing kept of an earlier one), stdout and stderr (pipes, not terminals), and exit
code. An exception that escapes main() is printed as the interpreter would print it (a Traceback,
exit 1), so assertions on "Traceback" keep their meaning. `timeout` is kept too: past it the command is interrupted by
SIGALRM and subprocess.TimeoutExpired raised, as subprocess.run does.

What stays process-level (the kubernetes import itself, a full disk's fd, Ctrl-C, exit at interpreter
shutdown) is tested with real subprocesses where it is the point.
"""

from __future__ import annotations

import gc
import io
import os
import signal
import subprocess
import sys
import traceback
from typing import Mapping

from slurmk8s import cli
from slurmk8s.profile import files as profile_files


class _Pipe(io.TextIOWrapper):
    """A text stream over bytes, as a pipe's: not a terminal, and it has .buffer."""

    def __init__(self, data: bytes = b""):
        super().__init__(io.BytesIO(data), encoding="utf-8", errors="strict", newline=None if data else "\n",
                         write_through=True)

    def text(self) -> str:
        self.flush()
        raw = self.buffer.getvalue()  # type: ignore[attr-defined]
        # subprocess.run(text=True) decodes with universal newlines
        return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def run_cli(args: list[str] | tuple[str, ...], *, env: Mapping[str, str] | None = None, input: str | None = None,
            cwd: str | os.PathLike | None = None, timeout: float | None = 60) -> subprocess.CompletedProcess:
    """cli.main() with sys.argv = ["slurmk8s", *args]; env (when given) replaces os.environ for the call."""
    argv = ["slurmk8s", *args]
    saved_env = dict(os.environ)
    saved = sys.argv, sys.stdin, sys.stdout, sys.stderr
    saved_cwd = os.getcwd()
    saved_threshold = gc.get_threshold()
    out, err, stdin = _Pipe(), _Pipe(), _Pipe((input or "").encode())

    def expired(signum: int, frame: object) -> None:
        raise subprocess.TimeoutExpired(argv, timeout or 0)

    previous_alarm = signal.signal(signal.SIGALRM, expired) if timeout else None
    code: int = 0
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv, sys.stdin, sys.stdout, sys.stderr = argv, stdin, out, err
        profile_files._stdin_data = None  # what a process keeps of its stdin (read once): a new process has none
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            cli.main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=err)
        except subprocess.TimeoutExpired:
            raise
        except BaseException:  # what the interpreter would print for an uncaught exception
            traceback.print_exc(file=err)
            code = 1
    finally:
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous_alarm)
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        gc.set_threshold(*saved_threshold)
    return subprocess.CompletedProcess(argv, code, out.text(), err.text())
