{{/* The chart name, overridable. */}}
{{- define "rph.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's object prefix: the release name, suffixed with the chart's unless it contains it
(harness/deploy/k8s/naming.py computes the same). */}}
{{- define "rph.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "rph.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable for the life of an object, so kept apart from the metadata labels. */}}
{{- define "rph.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rph.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "rph.labels" -}}
helm.sh/chart: {{ include "rph.chart" .root }}
{{ include "rph.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: rocketmq-pop-harness
{{- end }}

{{/* One variant's StatefulSet / Service / ConfigMap name (a Service name has no dots: 5.4.0 -> 5-4-0);
fails when a pod label would be too long. */}}
{{- define "rph.variantName" -}}
{{- $name := printf "%s-%s" (include "rph.fullname" .root) (.variant.name | replace "." "-") }}
{{- if gt (len $name) 52 }}
{{- fail (printf "variant %q: %q is longer than 52 characters (a StatefulSet name); shorten the variant or the release name, or set fullnameOverride" .variant.name $name) }}
{{- end }}
{{- $name }}
{{- end }}

{{- define "rph.harnessImage" -}}
{{ .Values.harnessImage.repository }}:{{ .Values.harnessImage.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Where agent jars live in the harness image (the repository's layout under /app). */}}
{{- define "rph.agentDir" -}}
/app/broker-patches/target
{{- end }}

{{/* A variant's agents, the wakeup probe last when enabled: a list of {jar, options}. */}}
{{- define "rph.agents" -}}
{{- $agents := list }}
{{- range .variant.agents }}
{{- $agents = append $agents (dict "jar" .jar "options" (.options | default "")) }}
{{- end }}
{{- if .root.Values.probe.enabled }}
{{- $agents = append $agents (dict "jar" "pop-wakeup-probe.jar" "options" "port={probe_port},host=0.0.0.0") }}
{{- end }}
{{- toJson $agents }}
{{- end }}

{{- define "rph.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* A properties value: Helm reads YAML numbers as float64, which would print 1.34217728e+08. */}}
{{- define "rph.prop" -}}
{{- if kindIs "float64" . }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- end }}

{{/* checkov (the security linter `make test` runs on every rendered profile) findings that are
deliberate, each with its reason: annotations on the workload. Usage: (list "CKV_K8S_43" ...). */}}
{{- define "rph.checkovSkips" -}}
{{- $reasons := dict
  "CKV_K8S_43" "images are named by release tag (a variant is its RocketMQ version; the harness image is built locally and loaded into kind, so it has no registry digest)"
  "CKV_K8S_15" "IfNotPresent by default because images loaded into kind cannot be pulled; set pullPolicy Always in values for a registry"
  "CKV2_K8S_6" "all traffic is between this release's pods in one namespace; no NetworkPolicy is imposed because kind's CNI and a user's cluster differ, and a wrong one would silently stop scrapes"
  "CKV_K8S_40" "runs as the image's own user (apache/rocketmq uid 3000, grafana uid 472), which owns the image's files"
  "CKV_K8S_38" "the load test restarts the variants' brokers and reads their logs through the API (a Role limited to this namespace)"
  "CKV_K8S_8" "a run's Locust worker is a batch pod: its process exiting is its end; a liveness probe would kill a worker busy past the probe's timeout and lose the run"
  "CKV_K8S_9" "no Service selects a run's Locust worker: the run reaches it by pod IP, so readiness decides nothing" }}
{{- range $i, $id := . }}
checkov.io/skip{{ add1 $i }}: {{ printf "%s=%s" $id (index $reasons $id) | quote }}
{{- end }}
{{- end }}

{{- /* The variants the chart deploys (a version): a variant with endpoints is a cluster of the user's, which
the load test measures as deployed and the chart starts nothing for. A JSON list (fromJsonArray). */}}
{{- define "rph.deployed" -}}
{{- $out := list }}
{{- range .Values.variants }}{{ if not .endpoints }}{{ $out = append $out . }}{{ end }}{{ end }}
{{- toJson $out }}
{{- end }}

{{/* The topologies every variant is deployed in (harness/deploy/k8s/pod.py's keys): single (the broker inside
its proxy's JVM; running after install), then those of .Values.topologies (scaled to zero until a run asks for
one). Usage: include "rph.topologyKeys" $ | fromJsonArray. */}}
{{- define "rph.topologyKeys" -}}
{{- $keys := list "single" }}
{{- range .Values.topologies }}
{{- $k := "single" }}
{{- if eq (.proxy | default "local") "cluster" }}
{{- $parts := list }}
{{- if gt (int (.masters | default 1)) 1 }}{{ $parts = append $parts "2m" }}{{ end }}
{{- if .slave }}{{ $parts = append $parts "slave" }}{{ end }}
{{- $k = join "-" $parts | default "cluster" }}
{{- end }}
{{- if not (has $k $keys) }}{{ $keys = append $keys $k }}{{ end }}
{{- end }}
{{- toJson $keys }}
{{- end }}

{{/* One variant's objects in one topology: <variant name> in single, <variant name>-<topology> otherwise
(harness/deploy/k8s/naming.py). */}}
{{- define "rph.topologyName" -}}
{{- $base := include "rph.variantName" (dict "root" .root "variant" .variant) }}
{{- $name := ternary $base (printf "%s-%s" $base .topology) (eq .topology "single") }}
{{- if gt (len $name) 52 }}
{{- fail (printf "variant %q in topology %s: %q is longer than 52 characters (a StatefulSet name); shorten the variant or the release name, or set fullnameOverride" .variant.name .topology $name) }}
{{- end }}
{{- $name }}
{{- end }}

{{/* The pod layout of every topology, generated from the local backend's definition (python -m harness.deploy.k8s.pod). */}}
{{- define "rph.layout" -}}
{{- .Files.Get "files/topologies.json" }}
{{- end }}

{{/* A part's placement (values placement.<part>): the pod spec's nodeSelector, affinity and tolerations, each
only when set. Call inside a pod spec: include "rph.placement" (dict "root" . "part" "brokers") | nindent N. */}}
{{- define "rph.placement" -}}
{{- $p := index .root.Values.placement .part }}
{{- with $p.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $p.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $p.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The runs volume is mounted by the load test's pod (it writes the archives) and by the comparison's driver
and executors (they read them). A ReadWriteOnce volume is mounted on one node at a time: placed apart, they
could not share it. Refused at install, in one line, rather than a comparison pod left Pending. */}}
{{- define "rph.runsVolumeShared" -}}
{{- $v := .Values }}
{{- if and $v.analysis.enabled (eq $v.loadtest.runsVolume.accessMode "ReadWriteOnce") (ne (include "rph.where" $v.placement.loadtest) (include "rph.where" $v.placement.analysis)) }}
{{- fail "placement: loadtest and analysis are placed apart, but the runs volume is ReadWriteOnce (one node at a time): set loadtest.runsVolume.accessMode=ReadWriteMany with a storage class that offers it, or give placement.analysis the same value as placement.loadtest" }}
{{- end }}
{{- end }}

{{/* What of a placement decides the node (nodeSelector, affinity; tolerations only allow), empty parts left out,
as JSON: two placements that say the same compare equal. */}}
{{- define "rph.where" -}}
{{- $out := dict }}
{{- with .nodeSelector }}{{ $_ := set $out "nodeSelector" . }}{{ end }}
{{- with .affinity }}{{ $_ := set $out "affinity" . }}{{ end }}
{{- toJson $out }}
{{- end }}
