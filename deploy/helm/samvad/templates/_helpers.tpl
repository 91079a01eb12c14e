{{/* Names, labels and the two computations every template shares: the grace period and HAProxy's configuration. */}}

{{- define "samvad.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "samvad.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "samvad.headless" -}}
{{- printf "%s-headless" (include "samvad.fullname" .) -}}
{{- end -}}

{{- define "samvad.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* Selector labels of one component ("server" or "haproxy"): pass (list $ "server"). */}}
{{- define "samvad.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "samvad.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/*
The shutdown budget, in whole seconds, from the same settings the nodes read (server/config.py):
- preStop: `samvad drain` waits for the node's drain, which it bounds by DRAIN_GRACE_SECONDS +
  LEASE_SECONDS + 10 (Settings.drain_bound_seconds): the grace, the handover's flushes, the release.
- then SIGTERM: uvicorn's graceful shutdown and the lifespan's last handover (Settings.shutdown_bound_seconds).
terminationGracePeriodSeconds covers both and a margin; tests/test_helm_chart.py checks it against Settings.
*/}}
{{- define "samvad.preStopSeconds" -}}
{{- add (ceil (addf .Values.cluster.drainGraceSeconds .Values.cluster.leaseSeconds)) 10 -}}
{{- end -}}

{{- define "samvad.shutdownSeconds" -}}
{{- add (ceil .Values.cluster.leaseSeconds) 5 -}}
{{- end -}}

{{- define "samvad.graceSeconds" -}}
{{- add (include "samvad.preStopSeconds" . | int) (include "samvad.shutdownSeconds" . | int) .Values.shutdown.marginSeconds -}}
{{- end -}}

{{- define "samvad.serverAddress" -}}
{{- $root := index . 0 -}}
{{- printf "%s-%d.%s.%s.svc.%s:%d" (include "samvad.fullname" $root) (index . 1) (include "samvad.headless" $root) $root.Release.Namespace $root.Values.haproxy.clusterDomain (int $root.Values.port) -}}
{{- end -}}
