{{/* Names: 63 characters at most (DNS labels). */}}
{{- define "metastore.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "metastore.fullname" -}}
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

{{- define "metastore.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "metastore.selectorLabels" -}}
app.kubernetes.io/name: {{ include "metastore.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "metastore.labels" -}}
helm.sh/chart: {{ include "metastore.chart" . }}
{{ include "metastore.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "metastore.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "metastore.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "metastore.image" -}}
{{- $repository := required "image.repository is required: the image built from the repository's Dockerfile" .Values.image.repository }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* http or https, for probes and the ServiceMonitor. */}}
{{- define "metastore.scheme" -}}
{{- if eq .Values.tls.mode "none" }}http{{ else }}https{{ end }}
{{- end }}

{{- define "metastore.caBundleEnabled" -}}
{{- $ca := .Values.database.caBundle }}
{{- if and $ca.secretName $ca.configMapName }}
{{- fail "database.caBundle: set secretName or configMapName, not both" }}
{{- end }}
{{- if or $ca.secretName $ca.configMapName }}true{{ end }}
{{- end }}

{{/* libpq's TLS settings, shared by the service and the migrations Job. */}}
{{- define "metastore.libpqEnv" -}}
{{- $ca := include "metastore.caBundleEnabled" . }}
{{- $sslmode := .Values.database.sslmode | default (ternary "verify-full" "" (eq $ca "true")) }}
{{- if $sslmode }}
- name: PGSSLMODE
  value: {{ $sslmode | quote }}
{{- end }}
{{- if $ca }}
- name: PGSSLROOTCERT
  value: {{ printf "/stackable/pg-ca/%s" .Values.database.caBundle.key | quote }}
{{- end }}
{{- end }}

{{- define "metastore.caBundleVolume" -}}
{{- $ca := .Values.database.caBundle }}
- name: pg-ca
{{- if $ca.secretName }}
  secret:
    secretName: {{ $ca.secretName }}
    defaultMode: 0444
{{- else }}
  configMap:
    name: {{ $ca.configMapName }}
    defaultMode: 0444
{{- end }}
{{- end }}

{{/* Seconds: what Kubernetes waits after SIGTERM (the preStop sleep counts against it). */}}
{{- define "metastore.terminationGracePeriodSeconds" -}}
{{- $floor := add .Values.lifecycle.preStopSleepSeconds .Values.config.shutdownGraceS }}
{{- $value := .Values.terminationGracePeriodSeconds | default (add $floor 5) }}
{{- if le (int $value) (int $floor) }}
{{- fail (printf "terminationGracePeriodSeconds=%v must exceed lifecycle.preStopSleepSeconds + config.shutdownGraceS (%v)" $value $floor) }}
{{- end }}
{{- $value }}
{{- end }}
