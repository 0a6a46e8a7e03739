"""The one state file of a lab: /run/slurmk8s/labs/<lab id>.json.

Two owners write their own section of it: the sandbox ("sandbox": bridge, netns, links,
processes, cgroup names; what teardown needs after a crash) and the booted lab ("lab": pods'
container pids, how to exec into them, the scale API's admin access, the supervisor's pid;
what a later `lab exec` / `lab down` / `scale --lab` needs). It lives under /run because
nothing it names survives a reboot. Labs booted before this file was one kept the sandbox
section as the whole file and the lab section in <lab dir>/lab.json; both are still read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from pathlib import Path

from slurmk8s.lab.errors import LabError
from slurmk8s.render import Bundle

STATE_DIR = Path("/run/slurmk8s/labs")
LAB_ROOT = Path("/var/lib/slurmk8s/labs")  # each lab's files (pods' volumes, logs, secrets)
SANDBOX, LAB = "sandbox", "lab"
LEGACY_LAB_FILE = "lab.json"
_LAB_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def lab_id_of(bundle: Bundle) -> str:
    """One lab per cluster name on a machine."""
    return f"lab-{bundle.cluster}"[:40]


def lab_prefix(lab_id: str) -> str:
    """Prefix of every netns and link of a lab: 'sk' + 6 hex digits of the id's hash."""
    if not _LAB_ID.match(lab_id):
        raise LabError(f"lab id {lab_id!r}: expected lowercase letters, digits and '-', at most 63")
    return "sk" + hashlib.sha1(lab_id.encode()).hexdigest()[:6]


def lab_dir_of(lab_id: str) -> Path:
    return LAB_ROOT / lab_id


def path_of(lab_id: str, state_dir: Path | None = None) -> Path:
    return (state_dir or STATE_DIR) / f"{lab_id}.json"


def read(path: Path) -> dict | None:
    """The whole document (sections by name), None when there is none; an old sandbox-only file is its sandbox section."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    if SANDBOX not in doc and LAB not in doc:  # written before the two files were one
        return {SANDBOX: doc}
    return doc


def read_section(lab_id: str, section: str, state_dir: Path | None = None,
                 legacy_lab_dir: Path | None = None) -> dict | None:
    """One section of a lab's state, None when the lab has none (the lab section of an older lab from its lab.json)."""
    doc = read(path_of(lab_id, state_dir)) or {}
    if section in doc:
        return doc[section]
    if section == LAB and legacy_lab_dir is not None:
        try:
            return json.loads((legacy_lab_dir / LEGACY_LAB_FILE).read_text())
        except (OSError, ValueError):
            return None
    return None


class StateFile:
    """The writer of one lab's state file, shared by the sandbox and the lab of one process.

    Each put replaces one section and rewrites the whole file atomically (0600: it holds the
    scale API's admin token), so a reader in another process always sees one whole document.
    """

    def __init__(self, lab_id: str, state_dir: Path | None = None):
        self.lab_id = lab_id
        self.state_dir = state_dir or STATE_DIR
        self.path = path_of(lab_id, self.state_dir)
        self._sections: dict[str, dict] = {}
        self._lock = threading.Lock()

    def put(self, section: str, value: dict) -> None:
        with self._lock:
            self._sections[section] = value
            self.state_dir.mkdir(parents=True, exist_ok=True)
            # not *.json: a half-written file is never listed as a lab
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(self._sections, fh, indent=1, sort_keys=True)
            os.replace(tmp, self.path)


def load_lab(lab_id: str) -> dict:
    """The lab section of a running lab's state; LabError when no lab of that id runs."""
    found = read_section(lab_id, LAB, legacy_lab_dir=lab_dir_of(lab_id))
    if found is None:
        raise LabError(f"no lab {lab_id} is running (start one with `slurmk8s lab up`)")
    return found
