{{/*
HAProxy's configuration, rendered from deploy/haproxy.cfg itself (files/haproxy.cfg is a link to it;
`helm package` stores the file's contents). Every routing and hashing line is that file's; the
template changes only what Kubernetes changes, and fails if the file no longer has what it replaces:
- the header comment (about scripts/cluster.sh's environment) gives way to one about the chart;
- the binds come from values, not from the environment;
- a `resolvers k8s` section, before `defaults`, finds the pods through the cluster's DNS;
- the server lines: one per ordinal up to maxReplicas, each the pod's stable DNS name under the
  headless Service, in ordinal order. HAProxy places a server on the consistent-hash ring by its id
  (1, 2, ... in line order), not by its address, so a pod that restarts with a new IP takes back the
  same arc, and every HAProxy replica computes the same ring. A name that does not resolve (a pod
  not yet scaled up) leaves its server in maintenance, off the ring, until it does.
tests/test_helm_chart.py holds the rendered configuration to deploy/haproxy.cfg outside these changes.
*/}}
{{- define "samvad.haproxyConfig" -}}
{{- $source := .Files.Get "files/haproxy.cfg" -}}
{{- $bind := "(?m)^(\\s*)bind \"\\$\\{SAMVAD_LB_BIND\\}\"$" -}}
{{- $stats := "(?m)^(\\s*)bind \"\\$\\{SAMVAD_LB_STATS\\}\"$" -}}
{{- $servers := "(?m)^\\s*server n[0-9]+ \"\\$\\{SAMVAD_NODE[0-9]+\\}\" check\\n" -}}
{{- $defaultServer := "(?m)^(\\s*default-server .*)$" -}}
{{- $defaults := "(?m)^defaults$" -}}
{{- range $what, $pattern := dict "bind on SAMVAD_LB_BIND" $bind "bind on SAMVAD_LB_STATS" $stats "server line on SAMVAD_NODEn" $servers "default-server line" $defaultServer "defaults section" $defaults }}
{{- if not (regexMatch $pattern $source) }}
{{- fail (printf "files/haproxy.cfg (deploy/haproxy.cfg) has no %s for the chart to replace" $what) }}
{{- end }}
{{- end }}
{{- $lines := list -}}
{{- range $i := until (int .Values.maxReplicas) }}
{{- $lines = append $lines (printf "    server %s-%d %s check resolvers k8s resolve-prefer ipv4 init-addr none" (include "samvad.fullname" $) $i (include "samvad.serverAddress" (list $ $i))) }}
{{- end }}
{{- $resolvers := list "resolvers k8s" -}}
{{- range $i, $ns := .Values.haproxy.resolvers.nameservers }}
{{- $resolvers = append $resolvers (printf "    nameserver dns%d %s" (add1 $i) $ns) }}
{{- end }}
{{- if not .Values.haproxy.resolvers.nameservers }}
{{- $resolvers = append $resolvers "    parse-resolv-conf" }}
{{- end }}
{{- $resolvers = concat $resolvers (list "    accepted_payload_size 8192" "    resolve_retries 3" "    timeout resolve 1s" "    timeout retry 1s" "    hold valid 5s" "    hold nx 5s" "    hold obsolete 5s" "" "defaults") }}
{{- $config := regexReplaceAll "\\A(#[^\\n]*\\n)+" $source "" -}}
{{- $config = regexReplaceAll $bind $config (printf "${1}bind \"%s:%d\"" .Values.haproxy.listen.address (int .Values.haproxy.listen.port)) -}}
{{- $config = regexReplaceAll $stats $config (printf "${1}bind \"%s:%d\"" .Values.haproxy.stats.address (int .Values.haproxy.stats.port)) -}}
{{- $config = regexReplaceAll $servers $config "" -}}
{{- $config = regexReplaceAll $defaultServer $config (printf "${1}\n%s" (join "\n" $lines)) -}}
{{- $config = regexReplaceAll $defaults $config (join "\n" $resolvers) -}}
# HAProxy in front of the Samvad StatefulSet {{ include "samvad.fullname" . }} (deploy/helm/samvad, docs/deployment.md).
# Rendered by the chart from deploy/haproxy.cfg: only the binds, the resolvers and the server lines
# differ. Every session-scoped path is routed by the session id in it, with a consistent hash, so a
# node that goes down moves only its own sessions, and each to one surviving node.
{{ $config }}
{{- end -}}
