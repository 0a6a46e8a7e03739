"""The pods' one API client (podside/kubeapi.py) against a real HTTPS server on 127.0.0.1: it verifies the
API server's certificate for kubernetes.default.svc (not the address it reached), retries what may heal,
and refuses the rest at once."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from apiserver import API_NAME, ApiServer, make_cert, service_account
from slurmk8s.podside import kubeapi


@pytest.fixture
def server(tmp_path: Path):
    cert, key = make_cert(tmp_path, [API_NAME, "kubernetes.default"])
    api = ApiServer(cert, key).start()
    yield api
    api.stop()


def client(tmp_path: Path, server: ApiServer, ca: Path | None = None, **settings) -> tuple[kubeapi.Api, list[float]]:
    """A client of the server by its address, trusting ca (the server's own certificate by default); its sleeps."""
    sleeps: list[float] = []
    sa = service_account(tmp_path / "sa", ca or server.cert)
    api = kubeapi.Api(sa_dir=str(sa), host="127.0.0.1", port=server.port, sleep=sleeps.append,
                      say=lambda line: None, **settings)
    return api, sleeps


def test_a_call_reaches_the_address_but_verifies_the_api_name(tmp_path, server) -> None:
    server.answers = [(200, {"spec": {"replicas": 3}})]
    api, _ = client(tmp_path, server)
    assert api.get("/apis/apps/v1/namespaces/slurm/statefulsets/dev-cpu/scale") == {"spec": {"replicas": 3}}
    assert server.server_names == [API_NAME]  # SNI: the name checked, not 127.0.0.1
    assert [(s.method, s.path) for s in server.seen] == [("GET", "/apis/apps/v1/namespaces/slurm/statefulsets/dev-cpu/scale")]
    assert server.seen[0].headers["Authorization"] == "Bearer pod-token"
    assert api.context.check_hostname and api.context.verify_mode.name == "CERT_REQUIRED"


def test_a_certificate_for_another_name_is_refused_and_not_retried(tmp_path) -> None:
    cert, key = make_cert(tmp_path, ["api.elsewhere.example"])
    other = ApiServer(cert, key).start()
    try:
        api, sleeps = client(tmp_path, other, attempts=4)
        with pytest.raises(kubeapi.ApiError, match="certificate is not valid for kubernetes.default.svc: "
                                                   "Hostname mismatch") as refused:
            api.get("/api/v1/nodes/n1")
        assert refused.value.status is None and sleeps == [] and other.seen == []
    finally:
        other.stop()


def test_a_certificate_the_cluster_ca_did_not_sign_is_refused(tmp_path, server) -> None:
    stranger, _ = make_cert(tmp_path, [API_NAME], stem="stranger")
    api, sleeps = client(tmp_path, server, ca=stranger)
    with pytest.raises(kubeapi.ApiError, match="not valid for kubernetes.default.svc"):
        api.get("/api/v1/nodes/n1")
    assert server.seen == [] and sleeps == []


def test_busy_and_failing_answers_are_retried_with_growing_pauses(tmp_path, server) -> None:
    server.answers = [(503, {}), (429, {}), (200, {"kind": "Pod"})]
    api, sleeps = client(tmp_path, server, attempts=5)
    assert api.pod("dev-cpu-0") == {"kind": "Pod"}
    assert len(server.seen) == 3 and sleeps == [1, 2]
    assert server.seen[0].path == "/api/v1/namespaces/slurm/pods/dev-cpu-0"


def test_after_the_last_attempt_the_error_says_what_was_answered(tmp_path, server) -> None:
    server.answers = [(500, {})]
    api, sleeps = client(tmp_path, server, attempts=3)
    with pytest.raises(kubeapi.ApiError, match=r"GET /api/v1/nodes/n1: no answer after 3 attempt\(s\): 500 "):
        api.get("/api/v1/nodes/n1")
    assert len(server.seen) == 3 and sleeps == [1, 2]


@pytest.mark.parametrize("status", [400, 401, 403, 409, 422])
def test_a_refusal_fails_at_once_with_its_status(tmp_path, server, status) -> None:
    server.answers = [(status, {})]
    api, sleeps = client(tmp_path, server)
    with pytest.raises(kubeapi.ApiError, match=f"^DELETE /api/v1/namespaces/slurm/pods/p: {status} ") as refused:
        api.delete_pod("p")
    assert refused.value.status == status and len(server.seen) == 1 and sleeps == []


def test_a_missing_object_is_none(tmp_path, server) -> None:
    server.answers = [(404, {"kind": "Status"})]
    api, _ = client(tmp_path, server)
    assert api.statefulset("dev-gone") is None and len(server.seen) == 1


def test_a_label_is_a_merge_patch_with_a_fresh_token(tmp_path, server) -> None:
    api, _ = client(tmp_path, server)
    api.label_pod("dev-cpu-0", "slurmk8s.io/busy", "true")
    (Path(api.sa_dir) / "token").write_text("rotated\n")  # the kubelet rotates projected tokens
    api.annotate_pod("dev-cpu-0", "slurmk8s.io/config-applied", "abc")
    first, second = server.seen
    assert (first.method, first.headers["Content-Type"]) == ("PATCH", kubeapi.MERGE_PATCH)
    assert json.loads(first.body) == {"metadata": {"labels": {"slurmk8s.io/busy": "true"}}}
    assert json.loads(second.body) == {"metadata": {"annotations": {"slurmk8s.io/config-applied": "abc"}}}
    assert (first.headers["Authorization"], second.headers["Authorization"]) == ("Bearer pod-token", "Bearer rotated")


def test_the_address_comes_from_the_pod_environment_and_the_namespace_only_when_needed(tmp_path, server, monkeypatch):
    """A token without a namespace file (the health check's projected volume) still reads cluster objects."""
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    sa = service_account(tmp_path / "kube", server.cert, namespace=None)
    api = kubeapi.Api(sa_dir=str(sa), attempts=1)
    assert (api.host, api.port) == ("127.0.0.1", server.port)
    assert api.get("/api/v1/nodes/n1") == {}
    with pytest.raises(FileNotFoundError):
        api.namespace


def test_without_an_environment_the_api_is_reached_by_its_name(tmp_path, server, monkeypatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    api = kubeapi.Api(sa_dir=str(service_account(tmp_path / "sa", server.cert)))
    assert (api.host, api.port, api.tls_name) == (API_NAME, 443, API_NAME)


def test_an_api_server_that_never_answers_times_out(tmp_path, server) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections, never speaks TLS
    try:
        sa = service_account(tmp_path / "sa", server.cert)
        sleeps: list[float] = []
        api = kubeapi.Api(sa_dir=str(sa), host="127.0.0.1", port=silent.getsockname()[1], timeout=0.2, attempts=2,
                          sleep=sleeps.append, say=lambda line: None)
        with pytest.raises(kubeapi.ApiError, match=r"no answer after 2 attempt\(s\): .*timed out"):
            api.get("/api/v1/nodes/n1")
        assert sleeps == [1]
    finally:
        silent.close()
