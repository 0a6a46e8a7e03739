"""The one reader of Slurm node states, for the CLI (status, scale, rollout, up's wait) and the pods (power,
busy marking, the rollout hook), so that both agree on what "drained" or "powering down" means.

One format: `sinfo --noheader --Node --format=%N|%T|%E` (https://slurm.schedmd.com/sinfo.html): the node,
its state in the long form with sinfo's flag suffixes, and the reason. Plain text, because it reads the
same on Slurm 22.05, 24.11 and 26.05, where `--json` output changed shape between the series; and sinfo,
not scontrol, because 22.05's scontrol hides powered-down CLOUD nodes and fails on a hidden one. `-N`
prints a node once per partition: the first line counts.

Standard library only; shipped beside the programs that need it, imported by its bare name.
"""

from __future__ import annotations

from dataclasses import dataclass

FORMAT = "%N|%T|%E"
# The suffixes sinfo appends to a state (sinfo(1), NODE STATE CODES).
NOT_RESPONDING = "*"
POWERED_DOWN = "~"
POWERING_UP = "#"
POWERING_DOWN = "%"
POWER_DOWN_ASKED = "!"  # power down pending
SUFFIXES = "*~#%!$@^-"  # and '$' maintenance, '@' reboot pending, '^' reboot issued, '-' planned by backfill
# States of a slurmd that registered; with a suffix of "*~#%!" it is not (not responding, or not running).
REGISTERED = {"idle", "allocated", "mixed", "completing", "planned", "reserved", "draining", "drained", "blocked"}
# States with a job on the node: a drained node that still runs one is "draining".
HOLDS_JOBS = {"allocated", "mixed", "draining"}
# States in which a node takes no job: the cluster is degraded while one is in them.
BAD = {"down", "fail", "failing", "not_responding", "inval"}


@dataclass(frozen=True)
class NodeState:
    """One node as sinfo shows it: `state` lowercase without suffixes, `flags` the suffixes, `reason` ('' for none)."""

    name: str
    state: str
    flags: str = ""
    reason: str = ""

    @property
    def text(self) -> str:
        """The state as sinfo printed it (lowercase): `idle~`, `draining`, `down*`."""
        return self.state + self.flags

    @property
    def base(self) -> str:
        """The first of a combined state (`idle+drain` -> `idle`)."""
        return self.state.split("+")[0]

    @property
    def registered(self) -> bool:
        """A registered, responding, running slurmd."""
        return self.state in REGISTERED and not set(self.flags) & set("*~#%!")

    @property
    def drained(self) -> bool:
        """Drained, or draining (a job still runs)."""
        return self.base.startswith("drain")

    @property
    def down(self) -> bool:
        return self.base.startswith("down")

    @property
    def powered_down(self) -> bool:
        return POWERED_DOWN in self.flags

    @property
    def powering_up(self) -> bool:
        return POWERING_UP in self.flags

    @property
    def powering_down(self) -> bool:
        """Slurm powers the node down, or is about to."""
        return POWERING_DOWN in self.flags or POWER_DOWN_ASKED in self.flags

    @property
    def not_responding(self) -> bool:
        return NOT_RESPONDING in self.flags

    @property
    def holds_jobs(self) -> bool:
        return self.base in HOLDS_JOBS

    @property
    def may_run_jobs(self) -> bool:
        """Neither down nor powered off (or going so): the node may hold jobs."""
        return bool(self.state) and not self.down and not (self.powered_down or POWERING_DOWN in self.flags)


def command(nodes: list[str] | str | None = None) -> list[str]:
    """The sinfo command whose output parse() reads, for the nodes named (a list or a hostlist), or all."""
    if isinstance(nodes, str):
        nodes = [nodes]
    return ["sinfo", "--noheader", "--Node", *([f"--nodes={','.join(nodes)}"] if nodes else []), f"--format={FORMAT}"]


def state_of(name: str, text: str, reason: str = "") -> NodeState:
    """A node whose state sinfo printed as text (`IDLE~`, `draining`), its flags split off."""
    text = text.strip().lower()
    state = text.rstrip(SUFFIXES)
    reason = reason.strip()
    return NodeState(name, state, text[len(state):], "" if reason == "none" else reason)


def parse_line(line: str) -> NodeState | None:
    """One line of the format, None for a line that is not one."""
    parts = line.strip().split("|", 2)
    if len(parts) < 2 or not parts[0].strip():
        return None
    return state_of(parts[0].strip(), parts[1], parts[2] if len(parts) > 2 else "")


def parse(text: str) -> dict[str, NodeState]:
    """sinfo's output in FORMAT -> {node: NodeState}, the first line of each node."""
    out: dict[str, NodeState] = {}
    for line in text.splitlines():
        node = parse_line(line)
        if node is not None and node.name not in out:
            out[node.name] = node
    return out
