"""The typed, defaulted cluster profile that every other module sees.

The YAML format is mapped onto these frozen dataclasses in loader.py only. Each section's dataclasses
live in the section's module (pools.py, slurm.py, ...); Profile holds them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurmk8s.profile.accounting import Accounting, Storage
from slurmk8s.profile.located import Locator
from slurmk8s.profile.login import Login
from slurmk8s.profile.observe import HealthChecks, Metrics, load_health_checks, load_metrics
from slurmk8s.profile.identity import Identity
from slurmk8s.profile.partitions import Partition
from slurmk8s.profile.pods import PodSettings
from slurmk8s.profile.pools import Pool
from slurmk8s.profile.resources import DaemonResources, load_resources
from slurmk8s.profile.restapi import TokenSecret
from slurmk8s.profile.scheduling import Scheduling, load_scheduling
from slurmk8s.profile.sidebyside import SideBySide
from slurmk8s.profile.slurm import Images
from slurmk8s.profile.topology import Topology
from slurmk8s.profile.volumes import SharedVolume


@dataclass(frozen=True)
class PowerSaving:
    """Slurm's power saving of the elastic pools (seconds)."""

    suspend_time: int
    suspend_timeout: int
    resume_timeout: int


@dataclass(frozen=True)
class Rollout:
    """spec.rollout: how `slurmk8s rollout` replaces slurmd pods."""

    drain_timeout: int = 3600
    max_unavailable: int = 1
    drain_on_cordon: bool = True  # a cordoned Kubernetes node drains its Slurm nodes (HealthCheckProgram)


@dataclass(frozen=True)
class Profile:
    """A validated, fully defaulted cluster profile."""

    name: str
    namespace: str
    version: str
    auth: str
    srun_port_range: str
    images: Images
    slurm_config: tuple[tuple[str, str], ...]
    controller_replicas: int
    controller_storage: Storage
    accounting: Accounting
    login: Login
    restapi_enabled: bool
    restapi_replicas: int
    pools: tuple[Pool, ...]
    partitions: tuple[Partition, ...]
    network_policy: bool
    admission_policy: bool  # spec.admissionPolicy.enabled: the busy label is all the controller's token may change
    power_saving: PowerSaving
    # Defaulted (the section's defaults) so fields added beside it by others may carry defaults too.
    scheduling: Scheduling = field(default_factory=lambda: load_scheduling({}))
    side_by_side: SideBySide | None = None  # spec.sideBySide (profile/sidebyside.py)
    topology: Topology | None = None  # spec.topology (profile/topology.py)
    cluster_domain: str = "cluster.local"  # spec.clusterDomain: the cluster's DNS domain
    metrics: Metrics = field(default_factory=lambda: load_metrics({}))  # spec.metrics (profile/observe.py)
    health_checks: HealthChecks = field(default_factory=lambda: load_health_checks({}, []))  # spec.healthChecks
    rollout: Rollout = field(default_factory=Rollout)  # spec.rollout
    identity: Identity | None = None  # spec.identity (profile/identity.py): None when nobody is declared
    volumes: tuple[SharedVolume, ...] = ()  # spec.volumes (profile/volumes.py)
    # requests/limits of slurmctld, slurmdbd, MariaDB and login (profile/resources.py)
    daemon_resources: DaemonResources = field(default_factory=lambda: load_resources({}))
    slurm_extra_files: tuple[tuple[str, str], ...] = ()  # spec.slurm.extraFiles: (name, text), sorted
    pod_settings: PodSettings = field(default_factory=PodSettings)  # spec.pods (profile/pods.py)
    restapi_tokens: tuple[TokenSecret, ...] = ()  # spec.restapi.tokens (profile/restapi.py)
    source: str = field(default="<profile>", compare=False)
    # Where each field was written (loader.py), so checks after loading (render/apirules.py) point at it.
    locator: Locator | None = field(default=None, compare=False, repr=False)

    def pool(self, name: str) -> Pool:
        return next(p for p in self.pools if p.name == name)

    def worker_image(self, pool: Pool) -> str:
        """The image of a pool's pods: its own spec.pools[].image, else spec.slurm.images.worker."""
        return pool.image or self.images.worker
