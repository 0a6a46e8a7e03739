"""How a user reaches a rendered cluster: the login hint `up` prints and the Helm chart's NOTES.txt shows.

Pure: read from the bundle (the login Service's type and port, the pods' names), so every output says
the same thing.
"""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.render.bundle import Bundle

LOCAL_SSH_PORT = 2222


def login_hint(bundle: Bundle, namespace: str) -> list[str]:
    """Lines telling how to log in (ssh) and run Slurm commands; namespace may be a template expression."""
    login = naming.component_name(bundle.cluster, naming.LOGIN)
    try:
        service = bundle.find("Service", login)
    except KeyError:
        controller = naming.controller_pod(bundle.cluster)
        return ["No login pods (spec.login.replicas is 0); run Slurm commands in the controller:",
                f"  kubectl -n {namespace} exec -it {controller} -c slurmctld -- sinfo"]
    kind, port = service["spec"]["type"], service["spec"]["ports"][0]["port"]
    lines = [f"Log in with ssh as root, with a key of spec.login.authorizedKeys (Service {login}, {kind}, port {port}):"]
    if kind == "LoadBalancer":
        lines += [f"  kubectl -n {namespace} get service {login}   # its EXTERNAL-IP",
                  f"  ssh -p {port} root@EXTERNAL-IP"]
    elif kind == "NodePort":
        lines += [f"  kubectl -n {namespace} get service {login} -o jsonpath='{{.spec.ports[0].nodePort}}'",
                  "  ssh -p NODE-PORT root@NODE-ADDRESS"]
    else:
        lines += [f"  kubectl -n {namespace} port-forward service/{login} {LOCAL_SSH_PORT}:{port}",
                  f"  ssh -p {LOCAL_SSH_PORT} root@127.0.0.1"]
    lines += ["or run Slurm commands in a login pod:",
              f"  kubectl -n {namespace} exec -it {naming.pod_name(login, 0)} -c sshd -- sinfo"]
    return lines
