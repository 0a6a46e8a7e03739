"""The Helm output: a chart whose templates are the rendered objects, with only Slurm-safe knobs as values.

Values expose what can change without desynchronising Slurm from its pods:
- pools.<pool>.replicas, held to the profile's minReplicas..maxReplicas by values.schema.json
  (Slurm already knows every node up to maxReplicas);
- workloads.<object>.image: the image of a workload's daemon (and of the containers sharing it);
- workloads.<object>.resources.<container>: requests/limits of the containers that are not Slurm
  nodes (a slurmd's CPUs and memory are its node definition in slurm.conf, so those stay fixed).
Everything else (names, Slurm config, node sizes) comes from the profile: change the profile, re-render.

Helm conventions: objects go to the release's namespace ({{ .Release.Namespace }}, also in the RBAC
subjects and the pods' DNS search domains); the chart ships no Namespace (`helm install
--create-namespace`); PVCs carry helm.sh/resource-policy: keep, so `helm uninstall` keeps the data as
`slurmk8s down` does (the chart holds no Secret: `slurmk8s secrets create` makes them); `global` is
allowed in the values so the chart works as a subchart; NOTES.txt says how to log in.

Day 2 under Helm: an elastic pool's replicas belong to Slurm's power saving (and KEDA) once it runs,
so on every later install or upgrade the template keeps the live StatefulSet's count (`lookup`,
held to minReplicas..maxReplicas as `up` does); the value only sizes the first install. Names come
from the profile, not the release name (Slurm's own config names every host): the chart fails,
before anything is written, when its objects already belong to another release or to `slurmk8s
up`, so two releases of one profile in one namespace never share objects (templates/_slurmk8s.tpl).

The chart version is 0.1.0+<12 hex digits of sha256 over the chart's content>: deterministic, it
changes exactly when the rendered chart changes, and as semver build metadata it never claims an
ordering between two renderings (the profile in git carries the history).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from slurmk8s import naming
from slurmk8s.output.plain import MARKER, object_filename, secrets_notice
from slurmk8s.output.yamlout import dump
from slurmk8s.render import Bundle
from slurmk8s.render.hints import login_hint

CHART_BASE_VERSION = "0.1.0"
RELEASE_NAMESPACE = "{{ .Release.Namespace }}"
# A whole value: quoted, so the template is YAML before Helm renders it too (yamllint, editors).
RELEASE_NAMESPACE_VALUE = f'"{RELEASE_NAMESPACE}"'
CLUSTER_SCOPED_KINDS = ("ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
ANNOTATION_RESOURCE_POLICY = "helm.sh/resource-policy"
KEPT_KINDS = ("PersistentVolumeClaim", "Secret")
# The account tree's Job runs after every install and upgrade, replacing the last run.
HOOK_ANNOTATIONS = {"helm.sh/hook": "post-install,post-upgrade", "helm.sh/hook-delete-policy": "before-hook-creation"}
PRE_HOOK_ANNOTATIONS = {**HOOK_ANNOTATIONS, "helm.sh/hook": "pre-install,pre-upgrade"}  # marked naming.HOOK_BEFORE_SYNC
_SENTINEL_BASE = "__helm_value"
HELPERS = "templates/_slurmk8s.tpl"
# Helm's own ownership annotation on every object it installed.
ANNOTATION_RELEASE_NAME = "meta.helm.sh/release-name"
# Containers whose resources are Slurm node sizes (slurm.conf) are never exposed.
_NODE_COMPONENTS = (naming.WORKER,)


def chart_name(bundle: Bundle) -> str:
    """The chart's name: slurm-<cluster>."""
    return f"slurm-{bundle.cluster}"


def _pool_of(obj: dict) -> str | None:
    """The values key of a pool StatefulSet: the pool, or <pool>-<leaf> for a pool split over topology leaves."""
    labels = obj["metadata"].get("labels", {}) if obj["kind"] == "StatefulSet" else {}
    pool = labels.get(naming.LABEL_POOL)
    return f"{pool}-{labels[naming.LABEL_DOMAIN]}" if pool and naming.LABEL_DOMAIN in labels else pool


class _Templater:
    """Replaces chosen values of objects by sentinels, remembering the template expression of each.

    The sentinel prefix is chosen so that it occurs nowhere in the rendered objects: a profile
    value that looks like a sentinel stays text instead of becoming (or breaking) a template.
    """

    def __init__(self, bundle: Bundle) -> None:
        self.expressions: list[str] = []
        rendered = "".join(dump(o) for o in bundle.objects)
        prefix = _SENTINEL_BASE
        while prefix in rendered:
            prefix += "_"
        self.prefix = prefix
        self.pattern = re.compile(re.escape(prefix) + r"_(\d+)__")

    def hole(self, expression: str) -> str:
        self.expressions.append(expression)
        return f"{self.prefix}_{len(self.expressions) - 1}__"

    def text(self, obj: dict) -> str:
        # Literal "{{" in rendered content (scripts, config) must reach the output as text.
        raw = dump(obj).replace("{{", '{{ "{{" }}')
        return self.pattern.sub(lambda m: self.expressions[int(m.group(1))], raw)


def _value(*path: str) -> str:
    keys = " ".join(json.dumps(p) for p in path[1:])
    return f"{{{{ toJson (index .Values.{path[0]} {keys}) }}}}"


def chart_values(bundle: Bundle) -> dict[str, Any]:
    """The default values: what the profile rendered."""
    pools, workloads = {}, {}
    for obj in bundle.objects:
        if obj["kind"] not in naming.WORKLOAD_KINDS:
            continue
        pool = _pool_of(obj)
        if pool is not None:
            pools[pool] = {"replicas": obj["spec"]["replicas"]}
        pod = obj["spec"]["template"]["spec"]
        entry: dict[str, Any] = {"image": pod["containers"][0]["image"]}
        component = obj["metadata"]["labels"].get(naming.LABEL_COMPONENT)
        if component not in _NODE_COMPONENTS:
            entry["resources"] = {c["name"]: c["resources"] for c in pod["containers"] if "resources" in c}
        workloads[obj["metadata"]["name"]] = entry
    return {"pools": pools, "workloads": workloads}


def _in_release_name(name: str, ns: str, t: _Templater) -> str:
    """A cluster-scoped name carries its namespace (naming.cluster_scoped): the release's, in a chart."""
    prefix = naming.cluster_scope(ns) + "-"
    return naming.cluster_scope(t.hole(RELEASE_NAMESPACE)) + "-" + name[len(prefix):] if name.startswith(prefix) else name


def _in_release_namespace(obj: dict, bundle: Bundle, t: _Templater) -> dict:
    """A copy of obj placed in the release's namespace: metadata, RBAC subjects, DNS search domains."""
    ns = bundle.namespace
    meta = dict(obj["metadata"])
    if "namespace" in meta:
        meta["namespace"] = t.hole(RELEASE_NAMESPACE_VALUE)
    if obj["kind"] in KEPT_KINDS:
        meta["annotations"] = dict(sorted({**meta.get("annotations", {}), ANNOTATION_RESOURCE_POLICY: "keep"}.items()))
    if "namespace" not in meta and obj["kind"] in CLUSTER_SCOPED_KINDS:
        meta["name"] = _in_release_name(meta["name"], ns, t)
    obj = {**obj, "metadata": meta}
    if obj["kind"] == "ClusterRoleBinding":
        obj["roleRef"] = {**obj["roleRef"], "name": _in_release_name(obj["roleRef"]["name"], ns, t)}
    if obj["kind"] == "ValidatingAdmissionPolicyBinding":
        obj["spec"] = {**obj["spec"], "policyName": _in_release_name(obj["spec"]["policyName"], ns, t)}
    if "subjects" in obj:
        obj["subjects"] = [{**s, "namespace": t.hole(RELEASE_NAMESPACE_VALUE)} if s.get("namespace") == ns else s
                           for s in obj["subjects"]]
    if obj["kind"] == "CronJob":  # its pod is one level down, in the Job template
        job = {"spec": obj["spec"]["jobTemplate"]["spec"]}
        job_spec = _with_release_search_domains(job, ns, t)["spec"]
        return {**obj, "spec": {**obj["spec"], "jobTemplate": {**obj["spec"]["jobTemplate"], "spec": job_spec}}}
    return _with_release_search_domains(obj, ns, t)


def _with_release_search_domains(obj: dict, ns: str, t: _Templater) -> dict:
    """A copy of a pod-template holder whose DNS search domains name the release's namespace."""
    pod = obj.get("spec", {}).get("template", {}).get("spec") if isinstance(obj.get("spec"), dict) else None
    if pod and "dnsConfig" in pod:
        marker = f".{ns}.svc."
        searches = [s.replace(marker, f".{t.hole(RELEASE_NAMESPACE)}.svc.", 1) for s in pod["dnsConfig"]["searches"]]
        pod = {**pod, "dnsConfig": {**pod["dnsConfig"], "searches": searches}}
        obj = {**obj, "spec": {**obj["spec"], "template": {**obj["spec"]["template"], "spec": pod}}}
    return obj


def _replicas(obj: dict, pool: str) -> str:
    """The replicas expression of a pool: the value; for an elastic pool, the live count once it runs."""
    value = _value("pools", pool, "replicas")
    elastic = naming.elastic_range(obj)
    if elastic is None:
        return value
    low, high = elastic
    return (f'{{{{ include "slurmk8s.replicas" (dict "ctx" . "name" {json.dumps(obj["metadata"]["name"])} '
            f'"min" {low} "max" {high} "value" (index .Values.pools {json.dumps(pool)} "replicas")) }}}}')


def helpers(bundle: Bundle) -> str:
    """templates/_slurmk8s.tpl: the elastic pools' live replicas and the one-release-per-profile guard."""
    owned_by = naming.config_map(bundle.cluster)
    return f"""{{{{- /* An elastic pool's size belongs to Slurm's power saving (and KEDA) once it runs: keep the live
count, held to minReplicas..maxReplicas as `slurmk8s up` does; .Values sizes the first install.
(`helm template` and `helm lint` see no cluster, so they print the value.) */ -}}}}
{{{{- define "slurmk8s.replicas" -}}}}
{{{{- $live := lookup "apps/v1" "StatefulSet" .ctx.Release.Namespace .name -}}}}
{{{{- if and $live $live.spec -}}}}
{{{{- max .min (min .max (int $live.spec.replicas)) -}}}}
{{{{- else -}}}}
{{{{- toJson .value -}}}}
{{{{- end -}}}}
{{{{- end -}}}}

{{{{- /* Names come from the slurmk8s profile ({bundle.cluster}), not from the release name: a second release of
this profile in one namespace would share every object. Refuse it before anything, hooks included, is written. */ -}}}}
{{{{- define "slurmk8s.one-release" -}}}}
{{{{- $cm := lookup "v1" "ConfigMap" .Release.Namespace {json.dumps(owned_by)} -}}}}
{{{{- if $cm -}}}}
{{{{- $owner := index ($cm.metadata.annotations | default dict) {json.dumps(ANNOTATION_RELEASE_NAME)} | default "" -}}}}
{{{{- if ne $owner .Release.Name -}}}}
{{{{- fail (printf "ConfigMap %s/{owned_by} exists and belongs to %s, not to release %q: the names of this chart come from the slurmk8s profile (cluster {bundle.cluster}), so one namespace holds one release of it; upgrade that release, or install into another namespace" .Release.Namespace (ternary (printf "release %q" $owner) "no Helm release (slurmk8s up?)" (ne $owner "")) .Release.Name) -}}}}
{{{{- end -}}}}
{{{{- end -}}}}
{{{{- end -}}}}
"""


def _template_object(obj: dict, t: _Templater) -> dict:
    """A copy of obj whose pool replicas, images and safe resources read .Values."""
    if obj["kind"] not in naming.WORKLOAD_KINDS:
        return obj
    name = obj["metadata"]["name"]
    spec = dict(obj["spec"])
    pool = _pool_of(obj)
    if pool is not None:
        spec["replicas"] = t.hole(_replicas(obj, pool))
    pod = dict(spec["template"]["spec"])
    main_image = pod["containers"][0]["image"]
    image = t.hole(_value("workloads", name, "image"))
    expose_resources = obj["metadata"]["labels"].get(naming.LABEL_COMPONENT) not in _NODE_COMPONENTS

    def container(c: dict, main: bool) -> dict:
        c = dict(c)
        if c.get("image") == main_image:
            c["image"] = image
        if main and expose_resources and "resources" in c:
            c["resources"] = t.hole(_value("workloads", name, "resources", c["name"]))
        return c

    pod["containers"] = [container(c, True) for c in pod["containers"]]
    if "initContainers" in pod:
        pod["initContainers"] = [container(c, False) for c in pod["initContainers"]]
    spec["template"] = {**spec["template"], "spec": pod}
    return {**obj, "spec": spec}


def values_schema(bundle: Bundle, values: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema of values.yaml: pool replicas within min..max, nothing unknown."""
    quantity = {"type": ["string", "number"]}
    resource_list = {"type": "object", "additionalProperties": quantity}
    resources = {"type": "object", "additionalProperties": False,
                 "properties": {"requests": resource_list, "limits": resource_list}}
    pools = {}
    for obj in bundle.objects:
        pool = _pool_of(obj)
        if pool is None:
            continue
        ann = obj["metadata"].get("annotations", {})
        lo, hi = int(ann.get(naming.ANNOTATION_MIN_REPLICAS, "0")), int(ann[naming.ANNOTATION_MAX_REPLICAS])
        pools[pool] = {"type": "object", "additionalProperties": False, "required": ["replicas"],
                       "properties": {"replicas": {
                           "type": "integer", "minimum": lo, "maximum": hi,
                           "description": f"running slurmd pods of pool {pool}; Slurm knows {pool}-0..{hi - 1}"}}}
    workloads = {}
    for name, entry in values["workloads"].items():
        props: dict[str, Any] = {"image": {"type": "string", "minLength": 1,
                                           "description": f"image of {name}'s daemon (same Slurm version)"}}
        if "resources" in entry:
            props["resources"] = {"type": "object", "additionalProperties": False,
                                  "properties": {c: resources for c in entry["resources"]}}
        workloads[name] = {"type": "object", "additionalProperties": False, "properties": props}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object", "additionalProperties": False,
        "properties": {
            "pools": {"type": "object", "additionalProperties": False, "properties": pools},
            "workloads": {"type": "object", "additionalProperties": False, "properties": workloads},
            # Helm passes an umbrella chart's global values to every subchart.
            "global": {"type": "object", "description": "Values an umbrella chart shares with its subcharts (unused here)."},
        },
    }


def notes(bundle: Bundle) -> str:
    """templates/NOTES.txt: what Helm prints after install and upgrade (a template: the namespace is the release's)."""
    lines = [f"Slurm cluster {bundle.cluster} in namespace {RELEASE_NAMESPACE}.",
             f"Its objects are named after the cluster of the slurmk8s profile ({bundle.cluster}-*), not after the",
             "release name: one release of this chart per namespace.", ""]
    if bundle.secrets:
        names = ", ".join(s.name for s in bundle.secrets)
        lines += [f"Its pods need the Secrets {names} in this namespace (the chart never holds key material).",
                  f"Create them once; for the profile's own namespace ({bundle.namespace}) this does it:",
                  "  slurmk8s secrets create PROFILE",
                  "and SECRETS.txt beside the chart's source lists their keys for any other way.", ""]
    lines += login_hint(bundle, RELEASE_NAMESPACE)
    return "\n".join(lines) + "\n"


def readme(bundle: Bundle) -> str:
    """README.md of the chart (`helm show readme`): where the names come from, and what upgrade keeps."""
    elastic = [o["metadata"]["name"] for o in bundle.objects if naming.elastic_range(o)]
    lines = [f"# {chart_name(bundle)}", "",
             f"Slurm cluster `{bundle.cluster}`, rendered by slurmk8s from its profile. Do not edit: change the",
             "profile and render again (`slurmk8s render PROFILE -o DIR --format helm`).", "",
             "## Names come from the profile, not from the release",
             "",
             f"Every object is named after the profile's cluster (`{bundle.cluster}-*`): Slurm's own configuration",
             "names each host, so the release name changes nothing, and there is no `nameOverride` or",
             "`fullnameOverride`. Install one release per namespace, under any release name:",
             "",
             "```sh",
             f"helm install {bundle.cluster} . -n NAMESPACE --create-namespace",
             "```",
             "",
             "A second release of this chart in a namespace that already holds one fails before anything is",
             f"written (ConfigMap `{naming.config_map(bundle.cluster)}` belongs to the first). For a second cluster,",
             "give the profile another `metadata.name` and render another chart.", ""]
    if elastic:
        lines += ["## Elastic pools keep their size on upgrade", "",
                  "Slurm's power saving (and KEDA) scale " + ", ".join(f"`{n}`" for n in elastic) + ". After the",
                  "first install, `helm upgrade` keeps each one's live replicas (within its minReplicas..maxReplicas);",
                  "`pools.<pool>.replicas` only sizes the first install. Scale one by hand with",
                  "`slurmk8s scale PROFILE POOL N`.", ""]
    return "\n".join(lines)


def helm_tree(bundle: Bundle) -> dict[str, str]:
    """Relative path -> content of the chart (Chart.yaml, values.yaml, values.schema.json, templates/)."""
    templater = _Templater(bundle)
    tree: dict[str, str] = {}
    for obj in bundle.objects:
        if obj["kind"] == "Namespace":
            continue  # the release's namespace: `helm install -n NS --create-namespace`
        placed = _in_release_namespace(obj, bundle, templater)
        tree["templates/" + object_filename(obj).removeprefix("manifests/")] = templater.text(_template_object(placed, templater))
    for hook in bundle.hooks:
        before = hook["metadata"].get("annotations", {}).get(naming.ANNOTATION_HOOK) == naming.HOOK_BEFORE_SYNC
        hooked = {**hook, "metadata": {**hook["metadata"], "annotations": dict(sorted(
            {**hook["metadata"].get("annotations", {}), **(PRE_HOOK_ANNOTATIONS if before else HOOK_ANNOTATIONS)}.items()))}}
        tree["templates/" + object_filename(hook).removeprefix("manifests/")] = \
            templater.text(_in_release_namespace(hooked, bundle, templater))
    tree[HELPERS] = helpers(bundle)
    tree["README.md"] = readme(bundle)
    values = chart_values(bundle)
    tree["values.yaml"] = ("# Only what can change without desynchronising Slurm; everything else comes from the\n"
                           "# slurmk8s profile (change it and re-render). Limits: values.schema.json.\n") + dump(values)
    tree["values.schema.json"] = json.dumps(values_schema(bundle, values), indent=2) + "\n"
    # Helm renders NOTES.txt with the objects, before any hook or object is written: the guard fails there.
    tree["templates/NOTES.txt"] = '{{- include "slurmk8s.one-release" . }}\n' + notes(bundle)
    tree[".helmignore"] = f"SECRETS.txt\n{MARKER}\n"
    if bundle.secrets:
        tree["SECRETS.txt"] = secrets_notice(bundle)
    digest = hashlib.sha256(json.dumps(tree, sort_keys=True).encode()).hexdigest()[:12]
    chart = {"apiVersion": "v2", "name": chart_name(bundle),
             "description": f"Slurm cluster {bundle.cluster}, rendered by slurmk8s from its profile",
             "type": "application", "version": f"{CHART_BASE_VERSION}+{digest}", "appVersion": bundle.version}
    tree["Chart.yaml"] = dump(chart)
    return dict(sorted(tree.items()))
