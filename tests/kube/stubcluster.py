"""The Kubernetes client actions take (kube.kubecluster.KubeCluster), pointed at the API stub.

The stub serves no exec: a test that lets an action run Slurm commands passes `slurm`
(argv -> stdout), which answers for slurmctld's pod.
"""

from __future__ import annotations

from typing import Callable

from slurmk8s.kube.kubecluster import KubeCluster


class StubCluster(KubeCluster):
    """A KubeCluster whose Slurm commands go to a fake when one is given."""

    def __init__(self, kubeconfig: str, slurm: Callable[[list[str]], str] | None = None, **options):
        super().__init__(kubeconfig, **options)
        self.fake_slurm = slurm
        self.slurm_bundles: list[str] = []  # the cluster each Slurm command was meant for

    def slurm(self, bundle, argv: list[str]) -> str:
        if self.fake_slurm is None:
            return super().slurm(bundle, argv)
        self.slurm_bundles.append(bundle.cluster)
        return self.fake_slurm(argv)


def stub_cluster(kubeconfig: str, slurm: Callable[[list[str]], str] | None = None, **options) -> StubCluster:
    return StubCluster(kubeconfig, slurm, **options)
