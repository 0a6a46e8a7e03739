"""spec.login.service as a front end: annotations, loadBalancerIP, loadBalancerSourceRanges and
externalTrafficPolicy on the login Service, each refused located where its type does not take it."""

from __future__ import annotations

import pytest

import kubevalidate
from slurmk8s import naming
from slurmk8s.errors import ProfileError
from slurmk8s.profile import load_profile
from slurmk8s.render import render

BASE = """\
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata: {name: demo}
spec:
  pools:
    - {name: cpu, replicas: 1, cpus: 2, memory: 2Gi}
  login:
    replicas: 1
"""
FRONT = """\
    service:
      type: LoadBalancer
      port: 2222
      annotations:
        service.beta.kubernetes.io/aws-load-balancer-type: nlb
        Example.COM/owner: hpc-team
      loadBalancerIP: 203.0.113.10
      loadBalancerSourceRanges: [198.51.100.0/24, '2001:db8::/32']
      externalTrafficPolicy: Cluster
"""
SELECTOR = {"app.kubernetes.io/instance": "demo", "app.kubernetes.io/component": "login"}
SSH = [{"name": "ssh", "port": 2222, "targetPort": 22, "protocol": "TCP"}]


def service(text: str) -> dict:
    return render(load_profile(text.encode())).find("Service", "demo-login")


def refusal(text: str) -> list[str]:
    with pytest.raises(ProfileError) as info:
        load_profile(text.encode())
    return str(info.value).splitlines()


def test_a_load_balancer_front_end_carries_every_field() -> None:
    svc = service(BASE + FRONT)
    assert svc["spec"] == {"type": "LoadBalancer", "selector": SELECTOR, "ports": SSH,
                           "externalTrafficPolicy": "Cluster", "loadBalancerIP": "203.0.113.10",
                           "loadBalancerSourceRanges": ["198.51.100.0/24", "2001:db8::/32"]}
    assert svc["metadata"]["annotations"] == {"Example.COM/owner": "hpc-team",
                                              "service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}


@pytest.mark.parametrize("kind, policy", [("ClusterIP", None), ("NodePort", "Local"), ("LoadBalancer", "Local")])
def test_left_out_the_service_is_as_before(kind: str, policy: str | None) -> None:
    """Local by default outside the cluster (the client's address reaches sshFrom's NetworkPolicy)."""
    svc = service(BASE + f"    service: {{type: {kind}}}\n")
    expected = {"type": kind, "selector": SELECTOR, "ports": [{**SSH[0], "port": 22}]}
    assert svc["spec"] == (expected if policy is None else {**expected, "externalTrafficPolicy": policy})
    assert "annotations" not in svc["metadata"]


@pytest.mark.parametrize("version", ["1.29.0", "1.34.0"])
def test_the_front_end_service_validates_strictly(version: str) -> None:
    kubevalidate.validate(service(BASE + FRONT), version, strict=True)


def test_a_changed_front_end_restarts_no_pod() -> None:
    """The Service is no part of a pod template: no login pod (nor any other) rolls."""
    def templates(text: str) -> dict[str, dict]:
        return {o["metadata"]["name"]: o["spec"]["template"] for o in render(load_profile(text.encode())).objects
                if o["kind"] in naming.WORKLOAD_KINDS}
    before = BASE + "    service: {type: LoadBalancer}\n"
    assert service(before) != service(BASE + FRONT)
    assert "demo-login" in templates(before)
    assert templates(before) == templates(BASE + FRONT)


# (id, service section, the one line)
REFUSALS = [
    ("ip-on-clusterip", "{loadBalancerIP: 203.0.113.10}",
     "<profile>:9:15: spec.login.service.loadBalancerIP: applies only to type LoadBalancer; this Service is ClusterIP"),
    ("ip-on-nodeport", "{type: NodePort, loadBalancerIP: 203.0.113.10}",
     "<profile>:9:31: spec.login.service.loadBalancerIP: applies only to type LoadBalancer; this Service is NodePort"),
    ("ranges-on-nodeport", "{type: NodePort, loadBalancerSourceRanges: [10.0.0.0/8]}",
     "<profile>:9:31: spec.login.service.loadBalancerSourceRanges: applies only to type LoadBalancer; "
     "this Service is NodePort"),
    ("policy-on-clusterip", "{externalTrafficPolicy: Local}",
     "<profile>:9:15: spec.login.service.externalTrafficPolicy: applies only to type NodePort or LoadBalancer; "
     "this Service is ClusterIP"),
    ("policy-unknown", "{type: NodePort, externalTrafficPolicy: local}",
     "<profile>:9:54: spec.login.service.externalTrafficPolicy: 'local' is not one of: Cluster, Local"),
    ("ip-not-an-ip", "{type: LoadBalancer, loadBalancerIP: 203.0.113.300}",
     "<profile>:9:51: spec.login.service.loadBalancerIP: '203.0.113.300' is not an IP address "
     "(such as 203.0.113.10 or 2001:db8::10)"),
    ("ip-with-zone", "{type: LoadBalancer, loadBalancerIP: 'fe80::1%eth0'}",
     "<profile>:9:51: spec.login.service.loadBalancerIP: 'fe80::1%eth0' has an IPv6 zone (%eth0); "
     "Kubernetes takes the address without it"),
    ("range-without-prefix", "{type: LoadBalancer, loadBalancerSourceRanges: [198.51.100.7]}",
     "<profile>:9:62: spec.login.service.loadBalancerSourceRanges[0]: '198.51.100.7' is not a CIDR: it needs "
     "a prefix length, such as 10.0.0.0/8 or fd00::/8"),
    ("annotation-key-two-slashes", "{annotations: {a.io/b/c: x}}",
     "<profile>:9:29: spec.login.service.annotations.a.io/b/c: 'a.io/b/c' has more than one '/'; "
     "an annotation key is [prefix/]name"),
    ("annotation-key-bad-name", "{annotations: {example.com/-x: x}}",
     "<profile>:9:29: spec.login.service.annotations.example.com/-x: 'example.com/-x' is not an annotation key: "
     "its name part must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"),
    ("annotation-key-bad-prefix", "{annotations: {ex_ample.com/x: x}}",
     "<profile>:9:29: spec.login.service.annotations.ex_ample.com/x: the prefix 'ex_ample.com' of an annotation "
     "key must be a DNS subdomain of at most 253 characters (letters, digits, '-' and '.')"),
    ("annotation-key-generators", "{annotations: {slurmk8s.io/config-hash: x}}",
     "<profile>:9:29: spec.login.service.annotations.slurmk8s.io/config-hash: 'slurmk8s.io/config-hash' is the "
     "generator's (its tools read slurmk8s.io/ keys)"),
]


@pytest.mark.parametrize("section, line", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_each_refusal_is_one_located_line(section: str, line: str) -> None:
    assert refusal(BASE + f"    service: {section}\n") == [line]


def test_annotations_over_256_kib_in_all_are_refused_as_the_api_server_does() -> None:
    # Keys and values count in UTF-8 bytes: 'é' is two.
    just = 256 * 1024 - len("a") - len("b") - 100_000 * 2
    text = BASE + "    service:\n      annotations:\n        a: '" + "é" * 100_000 + "'\n        b: '" + "x" * just + "'\n"
    assert service(text)["metadata"]["annotations"]["b"] == "x" * just
    assert refusal(text.replace("'x", "'xx")) == [
        "<profile>:10:7: spec.login.service.annotations: the annotations hold 262145 bytes (keys and values, UTF-8); "
        "Kubernetes takes at most 262144 (256 KiB) on one object"]
