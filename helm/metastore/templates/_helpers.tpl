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

{{/* The server pods, and only them: what the Service, the metrics Service, the PDB and the
Deployment select (the Jobs' pods carry another component). */}}
{{- define "metastore.serverSelectorLabels" -}}
{{ include "metastore.selectorLabels" . }}
app.kubernetes.io/component: server
app.kubernetes.io/role-group: {{ .Values.roleGroup | quote }}
{{- end }}

{{- define "metastore.serverLabels" -}}
{{ include "metastore.labels" . }}
app.kubernetes.io/component: server
app.kubernetes.io/role-group: {{ .Values.roleGroup | quote }}
{{- end }}

{{/* Bytes of a Kubernetes quantity (512Mi, 1Gi, 500M, 1073741824). */}}
{{- define "metastore.bytes" -}}
{{- $q := toString . }}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 }}
{{- $number := regexFind "^[0-9]+" $q }}
{{- $unit := trimPrefix $number $q }}
{{- if or (not $number) (and $unit (not (hasKey $units $unit))) }}
{{- fail (printf "%q is not a memory quantity this chart understands (use e.g. 512Mi, 1Gi or bytes)" $q) }}
{{- end }}
{{- if $unit }}{{ mul (int64 $number) (get $units $unit) }}{{ else }}{{ int64 $number }}{{ end }}
{{- end }}

{{/* The memory model, the one place its constants live: a server pod's resident memory stays
below base + connections x perConnection + inflightFactor x METASTORE_MAX_INFLIGHT_BYTES +
queueFactor x METASTORE_ASYNC_QUEUE_BYTES, and that must fit headroomPercent of the limit. */}}
{{- define "metastore.memoryModel" -}}
{{- /* Fitted to the peaks `make floods` measured (bench/results/memory.json): RSS <= 80 MiB
     + 75 KiB per connection + 3.5 x the bytes in flight + 5 x writers x max(batch, body)
     (the writers' batch and its copies) + 1.8 x the async queue held in memory. */ -}}
{{- $base := mul 80 1048576 }}
{{- $perConnection := mul 75 1024 }}
{{- $headroomPercent := 80 }}
{{- $c := .Values.config }}
{{- $limit := include "metastore.bytes" (required "resources.memory.limit is required" .Values.resources.memory.limit) | int64 }}
{{- $budget := div (mul $limit $headroomPercent) 100 }}
{{- $batch := max (int64 (default 4194304 $c.asyncBatchBytes)) (int64 $c.maxBodyBytes) }}
{{- $writers := mul 5 (mul (int64 $c.asyncWriters) $batch) }}
{{- $fixed := add $base (mul $c.maxConnections $perConnection) (div (mul 35 $c.maxInflightBytes) 10) $writers }}
{{- $room := sub $budget $fixed }}
{{- $queue := 0 }}
{{- if kindIs "invalid" $c.asyncQueueBytes }}
{{- $queue = div (mul $room 10) 18 }}
{{- if lt $queue 1048576 }}
{{- fail (printf "resources.memory.limit=%s leaves no room for the async queue: %d%% of it is %d bytes, and the process (80 MiB), config.maxConnections=%d (75 KiB each), 3.5 x config.maxInflightBytes=%d and 5 x config.asyncWriters x max(batch, body) need %d of them with 1 MiB of queue; raise the limit or lower those" (toString .Values.resources.memory.limit) $headroomPercent $budget (int64 $c.maxConnections) (int64 $c.maxInflightBytes) (add $fixed (div (mul 18 1048576) 10))) }}
{{- end }}
{{- else }}
{{- $queue = int64 $c.asyncQueueBytes }}
{{- if gt (add $fixed (div (mul 18 $queue) 10)) $budget }}
{{- fail (printf "config.asyncQueueBytes=%d cannot fit resources.memory.limit=%s: 80 MiB + config.maxConnections x 75 KiB + 3.5 x config.maxInflightBytes + 5 x writers x max(batch, body) + 1.8 x config.asyncQueueBytes = %d bytes, above %d%% of the limit (%d); at most %d fits (leave asyncQueueBytes null to derive it)" $queue (toString .Values.resources.memory.limit) (add $fixed (div (mul 18 $queue) 10)) $headroomPercent $budget (div (mul (max $room 0) 10) 18)) }}
{{- end }}
{{- end }}
{{- dict "limit" $limit "budget" $budget "fixed" $fixed "asyncQueueBytes" $queue | toJson }}
{{- end }}

{{/* Kubernetes resources from the platform's shape: cpu.min/max, memory.limit (= request). */}}
{{- define "metastore.resources" -}}
requests:
  cpu: {{ .cpu.min | quote }}
  memory: {{ .memory.limit | quote }}
limits:
  {{- with .cpu.max }}
  cpu: {{ . | quote }}
  {{- end }}
  memory: {{ .memory.limit | quote }}
{{- end }}

{{/* A libpq key/value connection string of the non-secret parts; user and password come from
PGUSER and PGPASSWORD, so no character of theirs needs escaping. */}}
{{- define "metastore.conninfo" -}}
{{- $db := .Values.database }}
{{- $parts := dict "host" $db.host "port" (toString $db.port) "dbname" $db.database }}
{{- range $key, $value := $db.parameters }}
{{- if has $key (list "user" "password" "host" "port" "dbname" "passfile") }}
{{- fail (printf "database.parameters.%s: set it with database.host, port, database or the credentials Secret" $key) }}
{{- end }}
{{- $_ := set $parts $key (toString $value) }}
{{- end }}
{{- $out := list }}
{{- range $key := keys $parts | sortAlpha }}
{{- $value := get $parts $key | replace "\\" "\\\\" | replace "'" "\\'" }}
{{- $out = append $out (printf "%s='%s'" $key $value) }}
{{- end }}
{{- join " " $out }}
{{- end }}

{{/* The connection env of a container: env name of the URL, and the Secrets to read. */}}
{{- define "metastore.databaseEnv" -}}
{{- $root := index . 0 }}{{- $envName := index . 1 }}{{- $credentials := index . 2 }}{{- $secret := index . 3 }}{{- $key := index . 4 }}{{- $what := index . 5 }}
{{- if $root.Values.database.host }}
{{- if not $credentials }}
{{- fail (printf "%s: with database.host, a credentials Secret (keys username and password) is required" $what) }}
{{- end }}
- name: {{ $envName }}
  value: {{ include "metastore.conninfo" $root | quote }}
- name: PGUSER
  valueFrom:
    secretKeyRef:
      name: {{ $credentials }}
      key: username
- name: PGPASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $credentials }}
      key: password
{{- else }}
{{- if not $secret }}
{{- fail (printf "%s is required: a Secret with the connection string, or database.host with a credentials Secret" $what) }}
{{- end }}
- name: {{ $envName }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
{{- end }}
{{- end }}

{{/* Escape hatches shared by every pod: the pod spec's extra fields. */}}
{{- define "metastore.podExtras" -}}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
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
