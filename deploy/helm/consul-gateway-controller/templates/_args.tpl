{{/* cgc.args are the controller's flags (docs/flags.md), as a YAML list. */}}
{{- define "cgc.args" -}}
- --consul-http-addr={{ .Values.consul.address }}
{{- if .Values.consul.acls.token.secretName }}
- --consul-token-file=/var/run/secrets/consul/token
{{- end }}
{{- if .Values.consul.tls.caCert.secretName }}
- --consul-cacert=/var/run/secrets/consul-ca/tls.crt
{{- end }}
{{- with .Values.consul.tls.serverName }}
- --consul-tls-server-name={{ . }}
{{- end }}
{{- if .Values.consul.allowPlaintext }}
- --consul-allow-plaintext
{{- end }}
- --cluster-id={{ .Values.clusterID }}
- --controller-name={{ .Values.controllerName }}
- --leader-elect={{ .Values.leaderElection.enabled }}
- --leader-elect-resource-namespace=$(POD_NAMESPACE)
- --metrics-bind-address=:8080
- --metrics-auth=kubernetes
- --health-probe-bind-address=:8081
- --memory-limit=$(MEMORY_LIMIT)
{{- if .Values.manageServiceDefaults }}
- --manage-service-defaults
{{- end }}
- --deploy-gateways={{ .Values.deployGateways }}
{{- if not .Values.admissionPolicy.enabled }}
- --require-admission-policy=false
{{- end }}
{{- with .Values.gatewayDefaults }}
{{- if .image }}
- --gateway-image={{ .image }}
{{- end }}
{{- if .consulAddress }}
- --gateway-consul-address={{ .consulAddress }}
{{- end }}
{{- if .authMethod }}
- --gateway-auth-method={{ .authMethod }}
{{- end }}
{{- end }}
{{- if .Values.responder.enabled }}
- --responder-service={{ .Values.responder.service }}
{{- end }}
- -v={{ include "cgc.verbosity" . }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
