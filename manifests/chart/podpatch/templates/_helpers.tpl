{{/* Names. Release "podpatch" (or any name containing "podpatch") keeps manifests/' names. */}}
{{- define "podpatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "podpatch.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "podpatch.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "podpatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "podpatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "podpatch.labels" -}}
{{ include "podpatch.selectorLabels" . }}
helm.sh/chart: {{ include "podpatch.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "podpatch.platformNamespace" -}}
{{- .Values.platformNamespace | default .Release.Namespace }}
{{- end }}

{{- define "podpatch.secretName" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "podpatch.fullname" .)) }}
{{- end }}

{{- define "podpatch.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* Annotations of both webhook configurations: cert-manager's CA injector reads the Certificate. */}}
{{- define "podpatch.webhookAnnotations" -}}
{{- if eq .Values.tls.mode "certManager" }}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "podpatch.fullname" . }}
{{- end }}
{{- end }}

{{/* clientConfig of a webhook entry; dict "root" . "path" "/mutate". */}}
{{- define "podpatch.clientConfig" -}}
{{- $root := .root }}
{{- if $root.Values.webhookURL }}
url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhookURL) .path | quote }}
{{- else }}
service: {name: {{ include "podpatch.fullname" $root }}, namespace: {{ $root.Release.Namespace }}, path: {{ .path }}, port: 443}
{{- end }}
{{- if eq $root.Values.tls.mode "existingSecret" }}
caBundle: {{ required "tls.existingSecret.caBundle is required with tls.mode existingSecret" $root.Values.tls.existingSecret.caBundle | b64enc }}
{{- end }}
{{- end }}

{{/* The default namespaceSelector: every namespace but the excluded ones and the platform's. */}}
{{- define "podpatch.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ concat .Values.mutatingWebhook.excludedNamespaces (list (include "podpatch.platformNamespace" .)) | uniq | toJson }}
{{- end }}

{{/* One mutating webhook entry; dict "root" . "name" "dask.podpatch.io" "m" <manager values> "resources" [...] "objectSelector" {...}. */}}
{{- define "podpatch.mutatingWebhook" -}}
{{- $root := .root }}
{{- $wh := $root.Values.mutatingWebhook }}
{{- $m := .m }}
- name: {{ .name }}
  admissionReviewVersions: [v1]
  sideEffects: None
  reinvocationPolicy: {{ $m.reinvocationPolicy | default $wh.reinvocationPolicy }}
  timeoutSeconds: {{ $m.timeoutSeconds | default $wh.timeoutSeconds }}
  failurePolicy: {{ $m.failurePolicy | default $wh.failurePolicy }}
  matchPolicy: Equivalent
  clientConfig:
    {{- include "podpatch.clientConfig" (dict "root" $root "path" "/mutate") | nindent 4 }}
  rules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      {{- $resources := .resources }}
      {{- if has "pods" $resources }}
      {{- $resources = concat $resources (list "pods/ephemeralcontainers" "pods/resize") }}
      {{- end }}
      resources: {{ toJson $resources }}
      scope: Namespaced
  namespaceSelector:
    {{- $m.namespaceSelector | default $wh.namespaceSelector | default (include "podpatch.namespaceSelector" $root | fromYaml) | toYaml | nindent 4 }}
  objectSelector:
    {{- toYaml .objectSelector | nindent 4 }}
  {{- with ($m.matchConditions | default $wh.matchConditions) }}
  matchConditions:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
