"""A PoolCluster with no API behind it: StatefulSet replicas in a dict, and the Slurm commands scale runs."""

from __future__ import annotations

from slurmk8s.podside import nodestate


class FakePoolCluster:
    """Replicas per StatefulSet; sinfo says every node asked about is idle (squeue: no jobs).

    sinfo answers in nodestate's one format. `powering_down` nodes show as idle% (powering down) for
    that many sinfo queries; when the last finishes, `after_power_down` runs (what the SuspendProgram
    does to the replicas). With `cluster`, every Slurm command must be meant for that cluster. `drained`
    nodes (node -> reason) show as drained with it until a `state=resume` names them.
    """

    def __init__(self, replicas: dict[str, int], powering_down: tuple[str, ...] = (), polls: int = 0,
                 after_power_down=lambda replicas: None, cluster: str | None = None, drained: dict | None = None):
        self.replicas, self.commands, self.cluster = dict(replicas), [], cluster
        self.drained = dict(drained or {})
        self.powering_down, self.polls, self.after_power_down = powering_down, polls, after_power_down

    def get_replicas(self, bundle, statefulset: str) -> int:
        return self.replicas[statefulset]

    def set_replicas(self, bundle, statefulset: str, replicas: int) -> None:
        self.replicas[statefulset] = replicas

    def live_replicas(self, bundle, statefulset: str) -> int | None:
        return self.replicas.get(statefulset)

    def slurm(self, bundle, argv: list[str]) -> str:
        assert self.cluster is None or bundle.cluster == self.cluster, bundle.cluster
        self.commands.append(argv)
        if argv[:2] == ["scontrol", "update"] and argv[3] == "state=resume":
            for node in argv[2].removeprefix("nodename=").split(","):
                self.drained.pop(node, None)
        if argv[0] != "sinfo":
            return ""
        asked = next(a for a in argv if a.startswith("--nodes=")).removeprefix("--nodes=").split(",")
        assert argv == nodestate.command(asked), argv
        if self.polls == 0 and self.powering_down:
            self.powering_down = ()
            self.after_power_down(self.replicas)
        self.polls = max(0, self.polls - 1)
        return "".join(f"{n}|drained|{self.drained[n]}\n" if n in self.drained
                       else f"{n}|{'idle%' if n in self.powering_down else 'idle'}|none\n" for n in asked)

    def queries(self) -> list[list[str]]:
        """The sinfo queries (the powering-down polls, then the drained nodes' one)."""
        return [c for c in self.commands if c[0] == "sinfo"]
