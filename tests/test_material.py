"""Key material made by `up`: the login host key is a real Ed25519 OpenSSH key, made by `cryptography`."""

from __future__ import annotations

import base64
import struct
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from slurmk8s import material
from slurmk8s.material import generate


def public_blob_of(key_file: bytes) -> bytes:
    """The public key blob in the unencrypted part of an OpenSSH private key file (PROTOCOL.key)."""
    body = base64.b64decode(b"".join(key_file.strip().splitlines()[1:-1]))
    assert body.startswith(b"openssh-key-v1\0")
    at = len(b"openssh-key-v1\0")
    for _ in range(3):  # cipher, kdf, kdf options
        at += 4 + struct.unpack(">I", body[at:at + 4])[0]
    assert struct.unpack(">I", body[at:at + 4])[0] == 1  # one key
    at += 4
    size = struct.unpack(">I", body[at:at + 4])[0]
    return body[at + 4:at + 4 + size]


def test_host_key_loads_back_and_its_public_half_matches() -> None:
    key_file = generate("ssh-host-ed25519")
    assert key_file.startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----\n")
    key = serialization.load_ssh_private_key(key_file, password=None)
    assert isinstance(key, Ed25519PrivateKey)
    public_line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert public_line.split()[0] == b"ssh-ed25519"
    assert base64.b64decode(public_line.split()[1]) == public_blob_of(key_file)


def test_host_key_is_made_by_cryptography(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not by arithmetic of our own: the key written is the one cryptography generated (RFC 8032 vector 1)."""
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")

    class Fixed:
        @staticmethod
        def generate() -> Ed25519PrivateKey:
            return Ed25519PrivateKey.from_private_bytes(seed)

    monkeypatch.setattr(material, "Ed25519PrivateKey", Fixed)
    key = serialization.load_ssh_private_key(generate("ssh-host-ed25519"), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    assert key.private_bytes_raw() == seed
    assert key.public_key().public_bytes_raw().hex() == (
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")


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
