"""Progress of one long wait: a live line on a terminal, plain timestamped lines otherwise.

    progress = Progress(sys.stderr)
    while not ready():
        progress.update("waiting for pod dev-cpu-0 to be Ready")
        sleep(5)
    progress.done("dev-cpu-0 is Ready")

On a terminal the line is redrawn in place with what is waited for, since when and for how long. Off a
terminal (a CI log, a file) a line is written, with its UTC time, each time the text changes, and again
every `heartbeat` seconds while it does not, so a log shows the command is alive without flooding.
"""

from __future__ import annotations

import os
import time
from typing import Callable, TextIO

CLEAR_LINE = "\r\x1b[K"  # carriage return, then erase to the end of the line (ECMA-48 EL)


def elapsed_text(seconds: float) -> str:
    """A short duration: 42s, 3m05s, 1h02m."""
    s = int(max(seconds, 0))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _width(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


class Progress:
    """One wait's progress on `stream`. `update(text)` says what is waited for now; `done()` ends the wait.

    The wait starts at the first `update` after construction or after `done()`: "since" is that moment,
    whatever the text says later. Write errors are not caught here: they reach the CLI's one error path.
    """

    def __init__(self, stream: TextIO, *, terminal: bool | None = None, heartbeat: float = 60,
                 now: Callable[[], float] = time.time):
        self.stream = stream
        self.terminal = _is_terminal(stream) if terminal is None else terminal
        self.heartbeat = heartbeat
        self.now = now
        self.since: float | None = None
        self._text: str | None = None  # the last text shown
        self._shown_at = 0.0
        self._live = False  # a live line is on the terminal, not yet ended by a newline

    def update(self, text: str) -> None:
        """Show that the wait goes on, and what it waits for now."""
        now = self.now()
        if self.since is None:
            self.since = now
        if self.terminal:
            since = time.strftime("%H:%M:%S", time.localtime(self.since))
            line = f"{text} (since {since}, {elapsed_text(now - self.since)})"
            self.stream.write(CLEAR_LINE + line[:max(_width(self.stream) - 1, 1)])
            self._live = True
        elif text != self._text or now - self._shown_at >= self.heartbeat:
            suffix = f" (waiting {elapsed_text(now - self.since)})" if now > self.since else ""
            self.stream.write(f"{_stamp(now)} {text}{suffix}\n")
            self._shown_at = now
        self._text = text
        self.stream.flush()

    def done(self, text: str | None = None) -> None:
        """End the wait: clear the live line, and leave `text`, if any, as a line of its own. A wait may
        follow; off a terminal, an update with the same text then shows only at the heartbeat."""
        if self._live:
            self.stream.write(CLEAR_LINE)
            self._live = False
        now = self.now()
        if text is not None:
            self.stream.write(f"{text}\n" if self.terminal else f"{_stamp(now)} {text}\n")
        self.stream.flush()
        # A log already shows `text`: an update saying it again waits for the heartbeat.
        self.since, self._text, self._shown_at = None, text, now


def _stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
