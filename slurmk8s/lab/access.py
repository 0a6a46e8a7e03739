"""A running lab as a cluster for `slurmk8s scale --lab`: its scale API and its controller pod."""

from __future__ import annotations

import json
import ssl
import urllib.request

from slurmk8s import naming
from slurmk8s.lab.cluster import exec_in_lab, lab_id_of, load_state
from slurmk8s.lab.errors import LabError
from slurmk8s.render import Bundle


def lab_pool_access(bundle: Bundle):
    """(get_replicas, set_replicas, slurm) bound to the bundle's running lab (started by `lab up`)."""
    lab_id = lab_id_of(bundle)
    state = load_state(lab_id)
    api = state.get("api")
    if not api:
        raise LabError(f"lab {lab_id} serves no scale API (no elastic pool, or not started by `slurmk8s lab up`)")
    context = ssl.create_default_context(cafile=api["ca"])
    context.check_hostname = False

    def call(method: str, sts: str, body: dict | None = None) -> int:
        url = (f"https://{api['address']}:{api['port']}/apis/apps/v1/namespaces/{bundle.namespace}"
               f"/statefulsets/{sts}/scale")
        request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                         headers={"Authorization": f"Bearer {api['token']}",
                                                  "Content-Type": "application/merge-patch+json"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=600) as response:
                return json.load(response)["spec"]["replicas"]
        except OSError as e:
            raise LabError(f"lab scale API: {method} {sts}: {e}") from e

    controller = naming.pod_name(naming.component_name(bundle.cluster, naming.CONTROLLER), 0)

    def slurm(argv: list[str]) -> str:
        done = exec_in_lab(lab_id, argv, pod=controller, timeout=60)
        if done.returncode != 0:
            raise LabError(f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    return (lambda sts: call("GET", sts)), (lambda sts, n: call("PATCH", sts, {"spec": {"replicas": n}})), slurm
