"""render/apirules.py: each API server rule it checks can fail, on objects only the generator could get wrong.

The profile-facing cases (each one located line from validate and render) are tests/profile/test_validation_agrees.py.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest

from slurmk8s.errors import ProfileError
from slurmk8s.profile.files import read_profile
from slurmk8s.profile.volumes import SharedVolume
from slurmk8s.render import render
from slurmk8s.render.apirules import api_rule_errors

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dev():
    profile = read_profile(ROOT / "profiles" / "kind-dev.yaml")
    return profile, list(render(profile).objects)


def login_pod(objects: list[dict]) -> dict:
    return next(o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "dev-login")["spec"]["template"]["spec"]


def broken(objects: list[dict], edit) -> list[dict]:
    """A deep copy of objects with edit applied to the login pod's spec."""
    out = copy.deepcopy(objects)
    edit(login_pod(out))
    return out


WHERE = "StatefulSet/dev-login"
CASES = [
    ("container-name", lambda pod: pod["containers"].append(dict(pod["containers"][0], ports=[])),
     f"{WHERE}: container name 'sshd' is used twice"),
    ("init-and-regular-container-name", lambda pod: pod["initContainers"][0].update(name="sshd"),
     f"{WHERE}: container name 'sshd' is used twice"),
    ("volume-name", lambda pod: pod["volumes"].append(dict(pod["volumes"][0])),
     f"{WHERE}: pod volume name 'slurm-config' is used twice"),
    ("mount-without-volume", lambda pod: pod["containers"][0]["volumeMounts"].append({"name": "nope", "mountPath": "/n"}),
     f"{WHERE}: container sshd mounts 'nope', which is no volume of the pod"),
    ("mount-path-cleaned", lambda pod: pod["containers"][0]["volumeMounts"].append(
        {"name": "etc-slurm", "mountPath": "/etc/slurm/./"}),
     f"{WHERE}: /etc/slurm is where {WHERE} already mounts 'etc-slurm' (container sshd); the API server refuses "
     "two mounts at one path: mount this volume elsewhere"),
    ("env-name", lambda pod: pod["containers"][0].setdefault("env", []).extend([{"name": "A", "value": "1"},
                                                                                {"name": "A", "value": "2"}]),
     f"{WHERE}: container sshd sets env A twice"),
    ("port-name", lambda pod: pod["containers"][0]["ports"].append(dict(pod["containers"][0]["ports"][0],
                                                                        containerPort=2222)),
     f"{WHERE}: container sshd names two ports 'ssh'"),
    ("two-containers-one-port", lambda pod: pod["containers"].append(
        {"name": "side", "image": "x", "ports": [{"containerPort": 22, "protocol": "TCP"}]}),
     f"{WHERE}: containers sshd and side both listen on TCP port 22"),
]


@pytest.mark.parametrize("edit, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_pod_rule_can_fail(dev, edit, expected: str) -> None:
    profile, objects = dev
    assert [e.format("p.yaml") for e in api_rule_errors(profile, broken(objects, edit))] == [f"p.yaml: {expected}"]


def test_the_rendered_examples_keep_every_rule(example_profile: Path) -> None:
    profile = read_profile(example_profile)
    bundle = render(profile)
    assert api_rule_errors(profile, list(bundle.objects + bundle.hooks)) == []


def test_an_init_container_may_use_a_port_a_container_uses(dev) -> None:
    """Init containers run before the others, never beside them."""
    profile, objects = dev
    edit = lambda pod: pod["initContainers"][0].update(ports=[{"containerPort": 22, "protocol": "TCP"}])  # noqa: E731
    assert api_rule_errors(profile, broken(objects, edit)) == []


def test_service_ports(dev) -> None:
    profile, objects = dev
    objects = copy.deepcopy(objects)
    service = next(o for o in objects if o["kind"] == "Service")
    service["spec"]["ports"].append(dict(service["spec"]["ports"][0]))
    name, port = service["spec"]["ports"][0]["name"], service["spec"]["ports"][0]["port"]
    assert [e.message for e in api_rule_errors(profile, objects)] == [
        f"Service/{service['metadata']['name']}: two ports named {name!r}",
        f"Service/{service['metadata']['name']}: TCP port {port} twice"]


def test_two_objects_of_one_name_without_a_field_to_blame(dev) -> None:
    profile, objects = dev
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    with pytest.raises(ProfileError) as info:
        from slurmk8s.render.apirules import refuse_api_violations
        refuse_api_violations(profile, objects + [copy.deepcopy(config)])
    assert str(info.value).splitlines() == [
        f"{profile.source}: two objects would be named ConfigMap/{config['metadata']['name']}; rename the pool, "
        "domain or shape whose name makes it"]


def test_a_volume_claim_named_as_the_controllers_is_blamed_on_the_volume() -> None:
    """gpu-ib has a backup controller, so a shared state claim: a claim volume of that name is refused by
    the profile checks, and, built in code past them, by the render's name rule, naming the volume (the
    document has no such item, so the line is spec.volumes')."""
    profile = read_profile(ROOT / "profiles" / "gpu-ib.yaml")
    clash = SharedVolume(name="controller-statesave", mount_path="/cs", read_only=False, on=("login",),
                         create_homes=False, claim_size="1Gi", claim_access_mode="ReadWriteMany")
    with pytest.raises(ProfileError) as info:
        render(dataclasses.replace(profile, volumes=profile.volumes + (clash,)))
    line = Path(profile.source).read_text().splitlines().index("  volumes:") + 2  # the first item's line
    assert str(info.value).splitlines() == [
        f"{profile.source}:{line}:5: spec.volumes: volume 'controller-statesave' would make "
        "PersistentVolumeClaim/research-controller-statesave, which the controller makes too; rename one of them"]
