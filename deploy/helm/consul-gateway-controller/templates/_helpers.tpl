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
{{- with .Values.consul.tls.serverName }}
- --consul-tls-server-name={{ . }}
{{- end }}
{{- if .Values.consul.allowPlaintext }}
- --consul-allow-plaintext
{{- end }}
- --service={{ .Values.responder.service }}
- --listen-address=:20000
- --health-address=:8081
- -v={{ include "cgc.verbosity" . }}
{{- end }}

{{/*
consul-k8s writes nodeSelector, tolerations and annotation lists as YAML strings; this
chart takes them so or as structures. cgc.yamlMap and cgc.yamlList render either as
YAML (empty for null); a string that is not a map (list) fails the install, naming the
value. Arguments: (list $ value "path.of.value").
*/}}
{{- define "cgc.yamlMap" -}}
{{- $v := index . 1 -}}
{{- if not $v -}}
{{- else if kindIs "string" $v -}}
{{- $m := tpl $v (index . 0) | fromYaml -}}
{{- if hasKey $m "Error" -}}
{{- fail (printf "%s: the string is not a YAML map: %s" (index . 2) (get $m "Error")) -}}
{{- end -}}
{{- toYaml $m -}}
{{- else -}}
{{- toYaml $v -}}
{{- end -}}
{{- end }}

{{- define "cgc.yamlList" -}}
{{- $v := index . 1 -}}
{{- if not $v -}}
{{- else if kindIs "string" $v -}}
{{- $doc := printf "items:\n%s" (tpl $v (index . 0) | indent 2) | fromYaml -}}
{{- if or (hasKey $doc "Error") (not (kindIs "slice" $doc.items)) -}}
{{- fail (printf "%s: the string is not a YAML list%s" (index . 2) (ternary (printf ": %v" (get $doc "Error")) "" (hasKey $doc "Error"))) -}}
{{- end -}}
{{- toYaml $doc.items -}}
{{- else -}}
{{- toYaml $v -}}
{{- end -}}
{{- end }}

{{/*
cgc.verbosity is the controller's klog -v: logLevel as a number, or consul-k8s's level
name mapped (error 0, warn 1, info 2: changes, debug 4: decisions, trace 6: API
traffic).
*/}}
{{- define "cgc.verbosity" -}}
{{- $names := dict "error" 0 "warn" 1 "info" 2 "debug" 4 "trace" 6 -}}
{{- if kindIs "string" .Values.logLevel -}}
{{- get $names .Values.logLevel -}}
{{- else -}}
{{- int .Values.logLevel -}}
{{- end -}}
{{- end }}

{{/*
cgc.consulK8sKeys fails the install on a consul-k8s managedGatewayClass key this chart
has no meaning for, unless it holds the value that asks for nothing (consul-k8s's
default), and says what to use instead.
*/}}
{{- define "cgc.consulK8sKeys" -}}
{{- $c := .Values.managedGatewayClass -}}
{{- $doc := "see docs/consul-k8s.md, section Values" -}}
{{- with $c.mapPrivilegedContainerPorts -}}
{{- fail (printf "managedGatewayClass.mapPrivilegedContainerPorts=%v: not needed here, gateway pods bind listener ports below 1024 themselves (NET_BIND_SERVICE); set 0 or remove it (%s)" . $doc) -}}
{{- end -}}
{{- /* restricted-v2 is consul-k8s's default and OpenShift's own for pods: it asks for nothing. */ -}}
{{- if not (has $c.openshiftSCCName (list nil "" "restricted-v2")) -}}
{{- fail (printf "managedGatewayClass.openshiftSCCName=%s: this chart binds gateway pods to no OpenShift SecurityContextConstraints; grant the gateway ServiceAccounts that SCC yourself and remove the value (%s)" $c.openshiftSCCName $doc) -}}
{{- end -}}
{{- if dig "enabled" false (default (dict) $c.scaling) -}}
{{- fail (printf "managedGatewayClass.scaling.enabled=true: consul-k8s Enterprise's per-Gateway scaling annotations are not read here; set managedGatewayClass.deployment.{defaultInstances,minInstances,maxInstances}, or replicas in a GatewayConfig (%s)" $doc) -}}
{{- end -}}
{{- if $c.useHostPorts -}}
{{- fail (printf "managedGatewayClass.useHostPorts=true: gateway pods get no host ports here; use serviceType NodePort or LoadBalancer (%s)" $doc) -}}
{{- end -}}
{{- end }}

{{/*
cgc.gatewayMetrics is GatewayConfig spec.metrics from consul-k8s's
managedGatewayClass.metrics: enabled true or false (a boolean, or its string), port and
path as given. "-" (consul-k8s: follow global.metrics.enabled, which this chart has
not) and null render nothing: the gateway pods serve no metrics.
*/}}
{{- define "cgc.gatewayMetrics" -}}
{{- $m := default (dict) .Values.managedGatewayClass.metrics -}}
{{- $enabled := dig "enabled" "-" $m -}}
{{- if not (has (toString $enabled) (list "-" "<nil>")) -}}
{{- if not (has (toString $enabled) (list "true" "false")) -}}
{{- fail (printf "managedGatewayClass.metrics.enabled=%v: want true, false or \"-\" (see docs/consul-k8s.md, section Values)" $enabled) -}}
{{- end -}}
enabled: {{ toString $enabled }}
{{- with dig "port" nil $m }}
port: {{ int . }}
{{- end }}
{{- with dig "path" nil $m }}
path: {{ . | quote }}
{{- end }}
{{- end -}}
{{- end }}
