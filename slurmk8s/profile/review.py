"""What `validate` warns about: settings a profile may make but a site's security review stops on.

Each is legal and sometimes wanted, so it is a warning (exit 0); `validate --strict` makes them
errors. Writing the profile is a cluster-admin power (docs/security.md): these are the settings
that use it beyond what slurmd already holds.
"""

from __future__ import annotations

from slurmk8s.errors import FieldError
from slurmk8s.profile.located import field_error, named_path
from slurmk8s.profile.model import Profile

# The labels and taints kubeadm (and kind) give control-plane nodes; master is the pre-1.24 name.
CONTROL_PLANE_KEYS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_ANNOTATIONS = ("seccomp.security.alpha.kubernetes.io/pod", "container.seccomp.security.alpha.kubernetes.io/")
_IMAGE_COMPONENTS = ("controller", "worker", "accounting", "login", "restapi", "database")


def image_tag_problem(ref: str) -> str | None:
    """Why an image reference is not pinned ('untagged', 'latest'), or None for a tag or a digest."""
    if "@" in ref:
        return None
    name = ref.rsplit("/", 1)[-1]
    if ":" not in name:
        return "untagged"
    return "latest" if name.rsplit(":", 1)[1] == "latest" else None


def security_warnings(profile: Profile) -> list[FieldError]:
    """Every warning for the profile, located where the setting was written."""
    return sorted(_placement(profile) + _images(profile) + _pod_annotations(profile) + _root_keys(profile))


def _placement(profile: Profile) -> list[FieldError]:
    out = []
    for pool in profile.pools:
        at = named_path(profile.locator, ("spec", "pools"), pool.name)
        for i, toleration in enumerate(dict(t) for t in pool.tolerations):
            if toleration.get("operator") == "Exists" and not toleration.get("key"):
                out.append(field_error(profile.locator, (*at, "tolerations", i),
                                       "tolerates every taint (operator Exists without a key): pool "
                                       f"{pool.name}'s privileged slurmd pods may run on any node, control-plane "
                                       "nodes included"))
            elif toleration.get("key") in CONTROL_PLANE_KEYS:
                out.append(field_error(profile.locator, (*at, "tolerations", i),
                                       f"tolerates the control-plane taint {toleration['key']}: pool {pool.name}'s "
                                       "privileged slurmd pods may run beside the API server and etcd"))
        for key, _ in pool.node_selector:
            if key in CONTROL_PLANE_KEYS:
                out.append(field_error(profile.locator, (*at, "nodeSelector", key),
                                       f"selects control-plane nodes: pool {pool.name}'s privileged slurmd pods, "
                                       "where jobs run, would run beside the API server and etcd", key=True))
    return out


def _images(profile: Profile) -> list[FieldError]:
    out = []
    for component in _IMAGE_COMPONENTS:
        ref = getattr(profile.images, component)
        problem = image_tag_problem(ref)
        if problem is None:
            continue
        path: tuple = ("spec", "slurm", "images", component)
        if component != "database" and not _written(profile, path) and _written(profile, path[:-1] + ("tag",)):
            path = path[:-1] + ("tag",)
        out.append(field_error(profile.locator, path, _unpinned(ref, problem)))
    for pool in profile.pools:
        problem = image_tag_problem(pool.image) if pool.image else None
        if pool.image and problem:
            at = named_path(profile.locator, ("spec", "pools"), pool.name)
            out.append(field_error(profile.locator, (*at, "image"), _unpinned(pool.image, problem)))
    return out


def _unpinned(ref: str, problem: str) -> str:
    what = "has no tag" if problem == "untagged" else "is tagged latest"
    return (f"image {ref} {what}: each pull may bring a different image (OnDelete pools keep whatever their pods "
            "pulled); pin a version tag or a digest")


def _pod_annotations(profile: Profile) -> list[FieldError]:
    out = []
    for key, value in profile.pod_settings.annotations:
        confinement = ("AppArmor" if key.startswith(APPARMOR_ANNOTATION) else
                       "seccomp" if key.startswith(SECCOMP_ANNOTATIONS) else None)
        if confinement and value == "unconfined":
            out.append(field_error(profile.locator, ("spec", "pods", "annotations", key),
                                   f"turns {confinement} off (unconfined) for every pod that has the container",
                                   key=True))
    return out


def _root_keys(profile: Profile) -> list[FieldError]:
    if not (profile.login.authorized_keys and profile.identity and profile.identity.users):
        return []
    return [field_error(profile.locator, ("spec", "login", "authorizedKeys"),
                        "root's keys are not used: spec.identity declares users, so sshd refuses root "
                        "(PermitRootLogin no); admins reach root with kubectl exec")]


def _written(profile: Profile, path: tuple) -> bool:
    return profile.locator is not None and profile.locator.written(path)
