"""Progress of one long wait: a live line on a terminal, plain timestamped lines otherwise.

`Progress(stream).update(text)` says what is waited for now; `.done(text)` ends the wait. On a
terminal the line is redrawn in place with the time the wait began and how long it has run; off a
terminal (a CI log, a file) a line with its UTC time is written each time the text changes.
"""

from __future__ import annotations

import time
from typing import Callable, TextIO

CLEAR_LINE = "\r\x1b[K"  # carriage return, then erase to the end of the line (ECMA-48 EL)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


class Progress:
    """One wait's progress on `stream`; the wait starts at the first update (after a done)."""

    def __init__(self, stream: TextIO, *, terminal: bool | None = None, now: Callable[[], float] = time.time):
        self.stream = stream
        self.terminal = _is_terminal(stream) if terminal is None else terminal
        self.now = now
        self.since: float | None = None
        self._text: str | None = None
        self._live = False  # a live line is on the terminal, not yet ended by a newline

    def update(self, text: str) -> None:
        """Show that the wait goes on, and what it waits for now."""
        now = self.now()
        if self.since is None:
            self.since = now
        if self.terminal:
            since = time.strftime("%H:%M:%S", time.localtime(self.since))
            self.stream.write(f"{CLEAR_LINE}{text} (since {since}, {now - self.since:.0f} s)")
            self._live = True
        elif text != self._text:
            self.stream.write(f"{_stamp(now)} {text}\n")
        self._text = text
        self.stream.flush()

    def done(self, text: str | None = None) -> None:
        """End the wait: clear the live line, and leave `text`, if any, as a line of its own."""
        if self._live:
            self.stream.write(CLEAR_LINE)
            self._live = False
        if text is not None:
            self.stream.write(f"{text}\n" if self.terminal else f"{_stamp(self.now())} {text}\n")
        self.stream.flush()
        self.since, self._text = None, None
