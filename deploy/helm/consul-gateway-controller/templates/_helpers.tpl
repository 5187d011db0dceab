{{/*
The objects' names are the kustomize base's (deploy/): the admission policy names the
controller's ServiceAccount and the Role names the Lease, so one release per cluster.
*/}}
{{- define "cgc.name" -}}consul-gateway-controller{{- end }}

{{/* Selector labels: the base's, never changed on an installed release. */}}
{{- define "cgc.selectorLabels" -}}
app.kubernetes.io/name: consul-gateway-controller
{{- end }}

{{- define "cgc.labels" -}}
{{ include "cgc.selectorLabels" . }}
app.kubernetes.io/part-of: consul-gateway-controller
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
cgc.base renders a file of the kustomize base (base/, links to deploy/) as this
release's object: the base's content, the chart's labels, the release's namespace for
namespaced kinds. Arguments: (list $ "file.yaml" namespaced).
*/}}
{{- define "cgc.base" -}}
{{- $root := index . 0 -}}
{{- $obj := $root.Files.Get (printf "base/%s" (index . 1)) | fromYaml -}}
{{- $_ := set $obj.metadata "labels" (include "cgc.labels" $root | fromYaml) -}}
{{- if index . 2 }}{{ $_ = set $obj.metadata "namespace" $root.Release.Namespace }}{{ end -}}
{{- toYaml $obj -}}
{{- end }}

{{/* cgc.image is the controller's image reference. */}}
{{- define "cgc.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end }}

{{/* The responder's selector labels: its own, apart from the controller's. */}}
{{- define "cgc.responderSelectorLabels" -}}
app.kubernetes.io/name: consul-gateway-controller-responder
{{- end }}

{{- define "cgc.responderLabels" -}}
{{ include "cgc.responderSelectorLabels" . }}
app.kubernetes.io/part-of: consul-gateway-controller
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* cgc.responderArgs are the responder's flags, as a YAML list. */}}
{{- define "cgc.responderArgs" -}}
- responder
- --consul-http-addr={{ .Values.consul.address }}
{{- if .Values.responder.consulToken.secretName }}
- --consul-token-file=/var/run/secrets/consul/token
{{- end }}
{{- if .Values.consul.tls.caCert.secretName }}
- --consul-cacert=/var/run/secrets/consul-ca/tls.crt
{{- end }}
{{- if .Values.consul.allowPlaintext }}
- --consul-allow-plaintext
{{- end }}
- --service={{ .Values.responder.service }}
- --listen-address=:20000
- --health-address=:8081
- -v={{ .Values.logLevel }}
{{- end }}
