{{/*
HAProxy's configuration: deploy/haproxy.cfg, section for section and line for line, except for what
Kubernetes changes. tests/test_helm_chart.py holds the two files equal outside these differences:
- the binds come from values (not the environment);
- `resolvers k8s` finds the pods through the cluster's DNS;
- the server lines: one per ordinal up to maxReplicas, each the pod's stable DNS name under the
  headless Service, in ordinal order. HAProxy places a server on the consistent-hash ring by its id
  (1, 2, ... in line order), not by its address, so a pod that restarts with a new IP takes back the
  same arc, and every HAProxy replica computes the same ring. A name that does not resolve (a pod
  not yet scaled up) leaves its server in maintenance, off the ring, until it does.
*/}}
{{- define "samvad.haproxyConfig" -}}
# HAProxy in front of the Samvad StatefulSet {{ include "samvad.fullname" . }} (deploy/helm/samvad, docs/deployment.md).
# Rendered by the chart from the same lines as deploy/haproxy.cfg; only the binds, the resolvers and
# the server lines differ. Every session-scoped path is routed by the session id in it, with a
# consistent hash, so a node that goes down moves only its own sessions, and each to one surviving node.

global
    maxconn {{ int .Values.haproxy.maxconn }}

resolvers k8s
{{- if .Values.haproxy.resolvers.nameservers }}
{{- range $i, $ns := .Values.haproxy.resolvers.nameservers }}
    nameserver dns{{ add1 $i }} {{ $ns }}
{{- end }}
{{- else }}
    parse-resolv-conf
{{- end }}
    accepted_payload_size 8192
    resolve_retries 3
    timeout resolve 1s
    timeout retry 1s
    hold valid 5s
    hold nx 5s
    hold obsolete 5s

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout tunnel 1h          # an open WebSocket; the server closes idle ones itself (4408)
    timeout client-fin 5s
    option http-server-close   # never reuse one server connection for two clients' requests
    # The client's address, appended to X-Forwarded-For: the nodes believe it from this proxy only
    # (TRUSTED_PROXIES), and read it from the right, so what a client wrote there is never taken.
    option forwardfor
    # A node that refuses the connection (killed, restarting): retry, the last time on another node,
    # which takes the session over from Neo4j once the dead node's lease has expired.
    retries 3
    option redispatch 1

frontend samvad
    bind "{{ .Values.haproxy.listen.address }}:{{ int .Values.haproxy.listen.port }}"
    # A client may not choose the id of a new session: only HAProxy sets this header.
    http-request del-header X-Samvad-Session-Id
    # /ws/sessions/<id>, /api/sessions/<id>[/graph|/report|/spectator-link]: the 4th field is the id.
    acl session_path path_beg /ws/sessions/ /api/sessions/
    acl create method POST
    acl create_path path /api/sessions
    http-request set-var(txn.sid) path,field(4,/) if session_path
    # A new session: HAProxy picks its id and hashes on it; the node creates the session under that id.
    http-request set-var(txn.sid) uuid if create create_path
    http-request set-header X-Samvad-Session-Id %[var(txn.sid)] if create create_path
    default_backend nodes

backend nodes
    # Paths without a session id (health, scenarios, the lobby) go round robin.
    balance hash var(txn.sid)
    hash-type consistent
    option httpchk GET /health
    http-check expect status 200
    # Down after two failed checks (1 s apart), up after two good ones. A draining node answers 503.
    default-server inter 1s fastinter 500ms downinter 1s fall 2 rise 2 maxconn 3000
{{- range $i := until (int .Values.maxReplicas) }}
    server {{ include "samvad.fullname" $ }}-{{ $i }} {{ include "samvad.serverAddress" (list $ $i) }} check resolvers k8s resolve-prefer ipv4 init-addr none
{{- end }}

frontend stats
    bind "{{ .Values.haproxy.stats.address }}:{{ int .Values.haproxy.stats.port }}"
    http-request use-service prometheus-exporter if { path /metrics }
    stats enable
    stats uri /stats
    stats refresh 5s
{{- end -}}
