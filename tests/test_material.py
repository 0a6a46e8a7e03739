"""Key material made by `up`: the login host key is a real Ed25519 OpenSSH key."""

from __future__ import annotations

import subprocess
from pathlib import Path

from slurmk8s.material import ed25519_public_key, generate


def test_public_key_matches_rfc8032_test_vector_1() -> None:
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    assert ed25519_public_key(seed).hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"


def test_each_host_key_is_new() -> None:
    assert generate("ssh-host-ed25519") != generate("ssh-host-ed25519")


def test_openssh_signs_with_the_host_key_and_its_public_half_verifies(tmp_path: Path) -> None:
    """ssh-keygen signs with the private seed; the check uses the public key stored in the file."""
    key = tmp_path / "ssh_host_ed25519_key"
    key.write_bytes(generate("ssh-host-ed25519"))
    key.chmod(0o600)
    public = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True, check=True).stdout
    assert public.startswith("ssh-ed25519 ")
    (tmp_path / "key.pub").write_text(public)
    message = tmp_path / "message"
    message.write_text("slurmk8s\n")
    subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", "file", str(message)], check=True,
                   capture_output=True)
    check = subprocess.run(["ssh-keygen", "-Y", "check-novalidate", "-n", "file", "-f", str(tmp_path / "key.pub"),
                            "-s", f"{message}.sig"], input=message.read_bytes(), capture_output=True)
    assert check.returncode == 0, check.stderr
