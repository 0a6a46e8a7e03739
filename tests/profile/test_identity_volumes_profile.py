"""spec.identity and spec.volumes: the model they load to, and each bad input as one located line."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmk8s.errors import ProfileError
from slurmk8s.profile.files import read_profile
from profile_texts import BASE

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYEXAMPLEKEY ada@example.org"

IDENTITY = f"""\
  identity:
    users:
      - {{name: ada, uid: 2001, sshKeys: ["{KEY}"], accounts: [physics]}}
      - {{name: max, uid: 2002, gid: 3000}}
    groups:
      - {{name: hpc, gid: 3000, members: [ada]}}
  scheduling:
    accounts:
      - {{name: physics, users: [max]}}
"""

VOLUMES = """\
  volumes:
    - {name: home, mountPath: /home, claimName: home-rwx}
    - {name: scratch, mountPath: /scratch/, nfs: {server: nfs.example, path: /export/scratch}, mountOn: [pools]}
    - {name: data, mountPath: /data, readOnly: true, claim: {size: 10Gi, storageClassName: nfs-rwx}}
"""


def load(text: str, tmp_path: Path):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return read_profile(str(path))


def errors(text: str, tmp_path: Path) -> list[str]:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        read_profile(str(path))
    assert info.value.exit_code == 2
    return [line.split(":", 1)[1] for line in str(info.value).splitlines()]


def test_identity_loads_users_groups_and_private_groups(tmp_path: Path) -> None:
    profile = load(BASE + IDENTITY, tmp_path)
    ident = profile.identity
    assert [(u.name, u.uid, u.gid, u.home, u.shell) for u in ident.users] == [
        ("ada", 2001, 2001, "/home/ada", "/bin/bash"), ("max", 2002, 3000, "/home/max", "/bin/bash")]
    assert [(g.name, g.gid, g.members) for g in ident.groups] == [("ada", 2001, ()), ("hpc", 3000, ("ada",))]
    assert ident.user("ada").ssh_keys == (KEY,)


def test_a_users_accounts_join_the_scheduling_tree(tmp_path: Path) -> None:
    profile = load(BASE + IDENTITY, tmp_path)
    physics = next(a for a in profile.scheduling.accounts if a.name == "physics")
    assert physics.users == ("ada", "max")
    assert {u.name: u.default_account for u in profile.scheduling.users} == {"ada": "physics", "max": "physics"}


def test_no_identity_means_none(tmp_path: Path) -> None:
    assert load(BASE, tmp_path).identity is None
    assert load(BASE + "  identity: {}\n", tmp_path).identity is None


def test_volumes_load_with_defaults(tmp_path: Path) -> None:
    vols = {v.name: v for v in load(BASE + VOLUMES, tmp_path).volumes}
    assert list(vols) == ["data", "home", "scratch"]
    assert (vols["home"].claim_name, vols["home"].on, vols["home"].create_homes, vols["home"].read_only) == \
        ("home-rwx", ("login", "pools"), True, False)
    assert (vols["scratch"].mount_path, vols["scratch"].on, vols["scratch"].create_homes) == ("/scratch", ("pools",), False)
    assert (vols["scratch"].nfs_server, vols["scratch"].nfs_path) == ("nfs.example", "/export/scratch")
    assert (vols["data"].claim_size, vols["data"].claim_storage_class, vols["data"].claim_access_mode,
            vols["data"].read_only) == ("10Gi", "nfs-rwx", "ReadWriteMany", True)


CASES = [
    ("scheduling-user-not-declared",
     IDENTITY + "      - {name: ml, users: [lin]}\n",
     ["20:28: spec.scheduling.accounts[1].users[0]: user 'lin' is not declared; declare it under "
      "spec.identity.users (declared: ada, max)"]),
    ("scheduling-users-entry-not-declared",
     IDENTITY.replace("users: [max]}", "users: [max, ken]}") + "    users:\n      - {name: ken}\n",
     ["19:38: spec.scheduling.accounts[0].users[1]: user 'ken' is not declared; declare it under "
      "spec.identity.users (declared: ada, max)",
      "21:16: spec.scheduling.users[0].name: user 'ken' is not declared; declare it under "
      "spec.identity.users (declared: ada, max)"]),
    ("duplicate-uid",
     IDENTITY.replace("uid: 2002", "uid: 2001"),
     ["14:26: spec.identity.users[1].uid: duplicate uid 2001 (also spec.identity.users[0])"]),
    ("gid-of-no-group",
     IDENTITY.replace("gid: 3000}", "gid: 3001}"),
     ["14:37: spec.identity.users[1].gid: gid 3001 is no declared group's (groups: hpc=3000); declare it under "
      "spec.identity.groups or leave gid out for a private group"]),
    ("reserved-name",
     IDENTITY.replace("name: max", "name: slurm").replace("users: [max]", "users: [slurm]"),
     ["14:16: spec.identity.users[1].name: 'slurm' is a system account of the images; choose another name"]),
    ("unknown-member",
     IDENTITY.replace("members: [ada]", "members: [ada, bob]"),
     ["16:47: spec.identity.groups[0].members[1]: unknown user 'bob' (declared users: ada, max)"]),
    ("unknown-account",
     IDENTITY.replace("accounts: [physics]", "accounts: [physics, chem]"),
     ["13:160: spec.identity.users[0].accounts[1]: unknown account 'chem' (spec.scheduling.accounts: physics)"]),
    ("uid-in-system-range",
     IDENTITY.replace("uid: 2001", "uid: 0"),
     ["13:26: spec.identity.users[0].uid: 0 is less than the minimum of 1000"]),
    ("volume-two-sources",
     VOLUMES.replace("claimName: home-rwx", "claimName: home-rwx, nfs: {server: a, path: /x}"),
     ["12:7: spec.volumes[0]: give exactly one source of claimName, nfs, claim, configMap, secret (found: claimName, nfs)"]),
    ("volume-no-source",
     VOLUMES.replace(", claimName: home-rwx", ""),
     ["12:7: spec.volumes[0]: give exactly one source of claimName, nfs, claim, configMap, secret (found: none)"]),
    ("volume-over-etc",
     VOLUMES.replace("mountPath: /data", "mountPath: /etc/slurm"),
     ["14:31: spec.volumes[2].mountPath: /etc/slurm would cover or sit in /etc, which the pods need for themselves; "
      "mount it elsewhere (e.g. /home, /scratch)"]),
    ("volume-same-path",
     VOLUMES.replace("mountPath: /data", "mountPath: /home"),
     ["14:31: spec.volumes[2].mountPath: /home is also spec.volumes[0]'s mountPath"]),
]


@pytest.mark.parametrize("section, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_identity_or_volume_is_one_located_line(section: str, expected: list[str], tmp_path: Path) -> None:
    assert errors(BASE + section, tmp_path) == expected
