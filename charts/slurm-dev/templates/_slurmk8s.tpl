{{- /* An elastic pool's size belongs to Slurm's power saving (and KEDA) once it runs: keep the live
count, held to minReplicas..maxReplicas as `slurmk8s up` does; .Values sizes the first install.
(`helm template` and `helm lint` see no cluster, so they print the value.) */ -}}
{{- define "slurmk8s.replicas" -}}
{{- $live := lookup "apps/v1" "StatefulSet" .ctx.Release.Namespace .name -}}
{{- if and $live $live.spec -}}
{{- max .min (min .max (int $live.spec.replicas)) -}}
{{- else -}}
{{- toJson .value -}}
{{- end -}}
{{- end -}}

{{- /* Names come from the slurmk8s profile (dev), not from the release name: a second release of
this profile in one namespace would share every object. Refuse it before anything, hooks included, is written. */ -}}
{{- define "slurmk8s.one-release" -}}
{{- $cm := lookup "v1" "ConfigMap" .Release.Namespace "dev-slurm-config" -}}
{{- if $cm -}}
{{- $owner := index ($cm.metadata.annotations | default dict) "meta.helm.sh/release-name" | default "" -}}
{{- if ne $owner .Release.Name -}}
{{- fail (printf "ConfigMap %s/dev-slurm-config exists and belongs to %s, not to release %q: the names of this chart come from the slurmk8s profile (cluster dev), so one namespace holds one release of it; upgrade that release, or install into another namespace" .Release.Namespace (ternary (printf "release %q" $owner) "no Helm release (slurmk8s up?)" (ne $owner "")) .Release.Name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
