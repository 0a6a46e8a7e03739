"""Pod networking for the kind clusters of slurmk8s's e2e suite (a DaemonSet, one per node).

Every kind node sits on one podman network, so pods need no overlay: each node gives its
pods addresses from its own podCIDR (CNI ptp + host-local), and routes every other node's
podCIDR to that node's address. Traffic from pods to anything outside the pod subnet is
masqueraded, so it can leave through podman's own NAT. NetworkPolicies are not enforced.

Reads the API with the pod's service-account token; standard library only.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SA = Path("/var/run/secrets/kubernetes.io/serviceaccount")
CNI_CONFIG = Path("/etc/cni/net.d/10-slurmk8s.conflist")
RESYNC_SECONDS = 5


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def api_base() -> str:
    """The API endpoint: kind patches CONTROL_PLANE_ENDPOINT in, so no Service IP is needed."""
    endpoint = os.environ.get("CONTROL_PLANE_ENDPOINT")
    if endpoint:
        return f"https://{endpoint}"
    return f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"


def list_nodes(base: str, context: ssl.SSLContext) -> list[dict]:
    request = urllib.request.Request(f"{base}/api/v1/nodes",
                                     headers={"Authorization": f"Bearer {(SA / 'token').read_text().strip()}"})
    with urllib.request.urlopen(request, context=context, timeout=10) as reply:
        return json.load(reply)["items"]


def internal_ip(node: dict) -> str | None:
    for address in node.get("status", {}).get("addresses", []):
        if address.get("type") == "InternalIP" and ":" not in address.get("address", ""):
            return address["address"]
    return None


def cni_config(pod_cidr: str) -> str:
    config = {
        "cniVersion": "0.4.0",
        "name": "slurmk8s",
        "plugins": [
            {"type": "ptp", "ipMasq": False, "mtu": 1500,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]], "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)  # the runtime must never read half a file
    return True


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True)


def ensure_masquerade(pod_subnet: str) -> None:
    rule = ("POSTROUTING", "-s", pod_subnet, "!", "-d", pod_subnet, "-j", "MASQUERADE")
    if run("iptables", "-t", "nat", "-C", *rule).returncode != 0:
        added = run("iptables", "-t", "nat", "-A", *rule)
        if added.returncode != 0:
            log(f"masquerade rule: {added.stderr.strip()}")


def sync(nodes: list[dict], me: str, routes: dict[str, str]) -> None:
    """Write this node's CNI config and route every other node's podCIDR to it."""
    for node in nodes:
        name, cidr, ip = node["metadata"]["name"], node.get("spec", {}).get("podCIDR"), internal_ip(node)
        if not cidr or not ip:
            continue
        if name == me:
            if write_if_changed(CNI_CONFIG, cni_config(cidr)):
                log(f"wrote {CNI_CONFIG} for podCIDR {cidr}")
        elif routes.get(cidr) != ip:
            result = run("ip", "route", "replace", cidr, "via", ip)
            if result.returncode == 0:
                routes[cidr] = ip
                log(f"route {cidr} via {ip} ({name})")
            else:
                log(f"route {cidr} via {ip}: {result.stderr.strip()}")


def main() -> None:
    me, pod_subnet = os.environ["NODE_NAME"], os.environ["POD_SUBNET"]
    base, context = api_base(), ssl.create_default_context(cafile=str(SA / "ca.crt"))
    routes: dict[str, str] = {}
    while True:
        try:
            ensure_masquerade(pod_subnet)
            sync(list_nodes(base, context), me, routes)
        except (OSError, ValueError, KeyError) as e:
            log(f"sync failed, retrying: {e}")
        time.sleep(RESYNC_SECONDS)


if __name__ == "__main__":
    main()
