"""The long-running side of `slurmk8s lab up`: boots the lab, answers its scale API, tears down on SIGTERM.

Run as `python -m slurmk8s.lab.supervisor PROFILE [CACHE_DIR]` in its own session; prints
READY (or FAILED: ...) on its own line once the lab is booted.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from slurmk8s.errors import SlurmK8sError
from slurmk8s.lab import lifecycle
from slurmk8s.profile.files import read_profile
from slurmk8s.render import render

READY, FAILED = "READY", "FAILED"


def main(argv: list[str]) -> int:
    """Boot, serve until SIGTERM/SIGINT, tear down."""
    profile, cache = argv[1], (Path(argv[2]) if len(argv) > 2 and argv[2] else None)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        lab = lifecycle.boot(render(read_profile(profile)), cache, log=lambda line: print(line, flush=True))
    except SlurmK8sError as e:
        print(f"{FAILED}: {e}", flush=True)
        return e.exit_code
    lab.publish_admin_access()
    print(READY, flush=True)
    stop.wait()
    left = lab.down()
    print("lab down" + (f"; left behind: {left}" if left else ""), flush=True)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
