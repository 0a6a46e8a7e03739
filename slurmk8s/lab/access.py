"""A running lab as the pool part of a cluster (actions/interface.py PoolCluster), for `slurmk8s scale --lab`:
its statefulsets/scale API and its controller pod."""

from __future__ import annotations

import json
import ssl
import urllib.request

from slurmk8s import naming
from slurmk8s.lab.lifecycle import exec_in_lab, lab_id_of, load_state
from slurmk8s.lab.errors import LabError
from slurmk8s.render import Bundle


class LabCluster:
    """The bundle's running lab (started by `lab up`); found from the bundle on each call."""

    def get_replicas(self, bundle: Bundle, statefulset: str) -> int:
        return self._scale("GET", bundle, statefulset)

    def set_replicas(self, bundle: Bundle, statefulset: str, replicas: int) -> None:
        self._scale("PATCH", bundle, statefulset, {"spec": {"replicas": replicas}})

    def live_replicas(self, bundle: Bundle, statefulset: str) -> int | None:
        # The lab runs every StatefulSet of its bundle from boot: there is none it lacks.
        return self.get_replicas(bundle, statefulset)

    def slurm(self, bundle: Bundle, argv: list[str]) -> str:
        controller = naming.controller_pod(bundle.cluster)
        done = exec_in_lab(lab_id_of(bundle), argv, pod=controller, timeout=60)
        if done.returncode != 0:
            raise LabError(f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    @staticmethod
    def _scale(method: str, bundle: Bundle, statefulset: str, body: dict | None = None) -> int:
        """One call to the lab's statefulsets/scale API; the replicas it answers."""
        lab_id = lab_id_of(bundle)
        api = load_state(lab_id).get("api")
        if not api:
            raise LabError(f"lab {lab_id} serves no scale API (no elastic pool, or not started by `slurmk8s lab up`)")
        context = ssl.create_default_context(cafile=api["ca"])
        context.check_hostname = False
        url = (f"https://{api['address']}:{api['port']}/apis/apps/v1/namespaces/{bundle.namespace}"
               f"/statefulsets/{statefulset}/scale")
        request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                         headers={"Authorization": f"Bearer {api['token']}",
                                                  "Content-Type": "application/merge-patch+json"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=600) as response:
                return json.load(response)["spec"]["replicas"]
        except OSError as e:
            raise LabError(f"lab scale API: {method} {statefulset}: {e}") from e
