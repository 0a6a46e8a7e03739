"""spec.pools[].image (issue 28): one pool's pods run their own slurmd image, the others the global one."""

from __future__ import annotations

import pytest

from slurmk8s.actions.up import with_built_images
from slurmk8s.errors import ProfileError
from slurmk8s.profile import load_profile
from slurmk8s.profile.review import security_warnings
from slurmk8s.render import render

CUDA = "registry.example.org/hpc/slurmd-cuda:26.05-debian14"
# gpu is written first: the model sorts pools by name, the paths index the document.
PROFILE = f"""\
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata: {{name: demo}}
spec:
  pools:
    - name: gpu
      replicas: 1
      cpus: 2
      memory: 2Gi
      image: {CUDA}
    - {{name: cpu, replicas: 1, cpus: 2, memory: 2Gi}}
"""
USERS = PROFILE + "  identity:\n    users: [{name: ada, uid: 2001}]\n"  # the identity-reload sidecar
MUNGE = PROFILE.replace("spec:\n", "spec:\n  slurm: {auth: munge, images: {registry: localhost/slurmk8s, "
                                   "os: debian14}}\n", 1)  # the munged sidecar
PINNED = ("each pull may bring a different image (OnDelete pools keep whatever their pods pulled); pin a version tag "
          "or a digest")


def pod_images(text: str, pool: str, prepare=lambda p: p) -> dict[str, str]:
    """Every container's image (init and sidecar too) in the pool's pod template, by container name."""
    spec = render(prepare(load_profile(text.encode()))).find("StatefulSet", f"demo-{pool}")["spec"]["template"]["spec"]
    return {c["name"]: c["image"] for c in spec["containers"] + spec.get("initContainers", [])}


@pytest.mark.parametrize("text, sidecar", [(PROFILE, None), (USERS, "identity-reload"), (MUNGE, "munged")],
                         ids=["plain", "identity-reload", "munged"])
def test_the_pools_pods_carry_its_image_and_the_others_keep_the_global_one(text: str, sidecar: str | None) -> None:
    gpu, cpu = pod_images(text, "gpu"), pod_images(text, "cpu")
    worker = load_profile(text.encode()).images.worker
    assert set(gpu.values()) == {CUDA}
    assert set(cpu.values()) == {worker} and worker != CUDA
    assert set(gpu) == set(cpu) and {"slurmd", "init-config"} <= set(gpu)
    if sidecar:
        assert sidecar in gpu


def test_worker_image_is_the_pools_own_or_the_global_one() -> None:
    profile = load_profile(PROFILE.encode())
    assert profile.worker_image(profile.pool("gpu")) == CUDA
    assert profile.worker_image(profile.pool("cpu")) == profile.images.worker


def test_up_images_local_leaves_the_pools_own_image_as_written() -> None:
    local = pod_images(PROFILE, "gpu", lambda p: with_built_images(p, "local")), \
        pod_images(PROFILE, "cpu", lambda p: with_built_images(p, "local"))
    assert set(local[0].values()) == {CUDA}
    assert set(local[1].values()) == {"localhost/slurmk8s/slurmd:26.05-debian14"}


@pytest.mark.parametrize("image, problem", [
    ("registry.example.org/hpc/slurmd-cuda:latest", "is tagged latest"),
    ("registry.example.org/hpc/slurmd-cuda", "has no tag"),
], ids=["latest", "untagged"])
def test_an_unpinned_pool_image_is_warned_at_its_own_field(image: str, problem: str) -> None:
    warnings = security_warnings(load_profile(PROFILE.replace(CUDA, image).encode(), "p.yaml"))
    assert [w.format("p.yaml") for w in warnings] == [f"p.yaml:10:14: spec.pools[0].image: image {image} {problem}: {PINNED}"]


def test_a_pinned_pool_image_is_not_warned() -> None:
    assert security_warnings(load_profile(PROFILE.encode())) == []
    digest = "registry.example.org/hpc/slurmd-cuda@sha256:" + "0" * 64
    assert security_warnings(load_profile(PROFILE.replace(CUDA, digest).encode())) == []


@pytest.mark.parametrize("image, message", [
    ("'Slurmd CUDA'", "expected an image reference such as registry.example.org/slurmd:24.11, found 'Slurmd CUDA'"),
    ("'-cuda:1'", "expected an image reference such as registry.example.org/slurmd:24.11, found '-cuda:1'"),
    ("7", "expected a string, found 7"),
], ids=["spaces", "leading-dash", "number"])
def test_a_bad_pool_image_is_refused_where_it_is_written(image: str, message: str) -> None:
    with pytest.raises(ProfileError) as refused:
        load_profile(PROFILE.replace(CUDA, image).encode(), "bad.yaml")
    assert [e.format("bad.yaml") for e in refused.value.errors] == [f"bad.yaml:10:14: spec.pools[0].image: {message}"]
