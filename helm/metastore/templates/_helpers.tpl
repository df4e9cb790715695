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

{{/* Labels are built as maps and written once: a key given twice (the vendor label in
`labels` and in a template, a pod label that is also a selector label) is one key, never two,
which kubectl kustomize and strict YAML loaders refuse. The chart's own win over `labels`. */}}
{{- define "metastore.labelMap" -}}
{{- $own := dict "helm.sh/chart" (include "metastore.chart" .) "app.kubernetes.io/version" (.Chart.AppVersion | toString) "app.kubernetes.io/managed-by" .Release.Service }}
{{- $own = merge $own (include "metastore.selectorLabels" . | fromYaml) }}
{{- toJson (merge $own (deepCopy (.Values.labels | default dict))) }}
{{- end }}

{{- define "metastore.labels" -}}
{{- include "metastore.labelMap" . | fromJson | toYaml }}
{{- end }}

{{/* The server pods, and only them: what the Service, the metrics Service, the PDB and the
Deployment select (the Jobs' pods carry another component). */}}
{{- define "metastore.serverSelectorLabels" -}}
{{ include "metastore.selectorLabels" . }}
app.kubernetes.io/component: server
app.kubernetes.io/role-group: {{ .Values.roleGroup | quote }}
{{- end }}

{{/* (dict "root" $ "component" "server" "extra" $map): the labels of an object of that component,
with more labels that never replace the chart's. */}}
{{- define "metastore.componentLabels" -}}
{{- $root := .root }}
{{- $labels := include "metastore.labelMap" $root | fromJson }}
{{- $_ := set $labels "app.kubernetes.io/component" .component }}
{{- if eq .component "server" }}
{{- $_ := set $labels "app.kubernetes.io/role-group" ($root.Values.roleGroup | toString) }}
{{- end }}
{{- toYaml (merge $labels (deepCopy (.extra | default dict))) }}
{{- end }}

{{/* (list $ $extra): the chart's labels and more that never replace them. */}}
{{- define "metastore.labelsWith" -}}
{{- toYaml (merge (include "metastore.labelMap" (index . 0) | fromJson) (deepCopy (index . 1 | default dict))) }}
{{- end }}

{{- define "metastore.serverLabels" -}}
{{- include "metastore.componentLabels" (dict "root" . "component" "server") }}
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
{{- /* The service's documented memory bound (docs/operations.md, "Sizing"; the constants of
     bench/results/memory.json, which tests/packaging/test_chart_memory.py holds this to), for the
     chart's shape, which always has a spool:
       80 MiB + connections x 90 KiB + 1.0 x bytes in flight
       + libpq's send buffers: sync mode, poolMax x max(group commit 1 MiB, large event 256 KiB)
         + 1 large-event call x the body limit; async mode with asyncQueueFull=sync, poolMax x
         the body limit (an ingest connection may store any event when the queue is full)
       + 4.1 x writers x max(batch 4 MiB, the body limit)
       + the read side: 2 x the event feed's buffer (32 MiB) + 3 read connections x 32 MiB.
     The service's defaults of METASTORE_GROUP_COMMIT_BYTES, _LARGE_EVENT_BYTES, _LARGE_EVENT_CALLS
     _ASYNC_BATCH_BYTES, _FEED_BUFFER_BYTES and _READ_POOL_MAX apply: the chart does not set them. With a spool the async queue waits
     on disk; its bytes (a queue in memory counts 1.6 x) still get the room left. */ -}}
{{- $mib := 1048576 }}
{{- $base := mul 80 $mib }}
{{- $perConnection := mul 90 1024 }}
{{- $headroomPercent := 80 }}
{{- $c := .Values.config }}
{{- $limit := include "metastore.bytes" (required "resources.memory.limit is required" .Values.resources.memory.limit) | int64 }}
{{- $budget := div (mul $limit $headroomPercent) 100 }}
{{- $body := int64 $c.maxBodyBytes }}
{{- $sendBuffers := add (mul (int64 $c.poolMax) (max $mib 262144)) $body }}
{{- if eq $c.ingestMode "async" }}
{{- $sendBuffers = ternary (mul (int64 $c.poolMax) $body) 0 (eq $c.asyncQueueFull "sync") }}
{{- end }}
{{- $batch := max 4194304 $body }}
{{- $writers := div (mul 41 (mul (int64 $c.asyncWriters) $batch)) 10 }}
{{- $readSide := add (mul 2 (mul 32 $mib)) (mul 3 (mul 32 $mib)) }}
{{- $fixed := add $base (mul $c.maxConnections $perConnection) (int64 $c.maxInflightBytes) $sendBuffers $writers $readSide }}
{{- $room := sub $budget $fixed }}
{{- $queue := 0 }}
{{- if kindIs "invalid" $c.asyncQueueBytes }}
{{- $queue = div (mul $room 10) 16 }}
{{- if lt $queue $mib }}
{{- fail (printf "resources.memory.limit=%s leaves no room for the async queue: %d%% of it is %d bytes, and the service's memory bound (docs/operations.md, \"Sizing\": 80 MiB, config.maxConnections=%d x 90 KiB, config.maxInflightBytes=%d, libpq's send buffers %d, 4.1 x config.asyncWriters x max(4 MiB, config.maxBodyBytes) = %d, the read side 160 MiB) needs %d of them with 1 MiB of queue; raise the limit or lower those" (toString .Values.resources.memory.limit) $headroomPercent $budget (int64 $c.maxConnections) (int64 $c.maxInflightBytes) $sendBuffers $writers (add $fixed (div (mul 16 $mib) 10))) }}
{{- end }}
{{- else }}
{{- $queue = int64 $c.asyncQueueBytes }}
{{- if gt (add $fixed (div (mul 16 $queue) 10)) $budget }}
{{- fail (printf "config.asyncQueueBytes=%d cannot fit resources.memory.limit=%s: the service's memory bound (docs/operations.md, \"Sizing\") of %d bytes + 1.6 x config.asyncQueueBytes = %d bytes, above %d%% of the limit (%d); at most %d fits (leave asyncQueueBytes null to derive it)" $queue (toString .Values.resources.memory.limit) $fixed (add $fixed (div (mul 16 $queue) 10)) $headroomPercent $budget (div (mul (max $room 0) 10) 16)) }}
{{- end }}
{{- end }}
{{- dict "limit" $limit "budget" $budget "fixed" $fixed "asyncQueueBytes" $queue | toJson }}
{{- end }}

{{/* extraEnv is applied after the ConfigMap, so an entry naming a variable of the memory model (or
the spool's bound) would override it unseen, and the pod could outgrow the limit (or the spool its
volume) that the model checked. Those are set through the values the model reads, or not at all. */}}
{{- define "metastore.extraEnvChecked" -}}
{{- $fromValues := dict
    "METASTORE_MAX_BODY_BYTES" "config.maxBodyBytes"
    "METASTORE_MAX_CONNECTIONS" "config.maxConnections"
    "METASTORE_MAX_INFLIGHT_BYTES" "config.maxInflightBytes"
    "METASTORE_POOL_MAX" "config.poolMax"
    "METASTORE_INGEST_MODE" "config.ingestMode"
    "METASTORE_ASYNC_QUEUE_BYTES" "config.asyncQueueBytes"
    "METASTORE_ASYNC_QUEUE_FULL" "config.asyncQueueFull"
    "METASTORE_ASYNC_WRITERS" "config.asyncWriters"
    "METASTORE_SPOOL_MAX_BYTES" "spool.size" }}
{{- $atDefault := list "METASTORE_GROUP_COMMIT_BYTES" "METASTORE_LARGE_EVENT_BYTES" "METASTORE_LARGE_EVENT_CALLS"
    "METASTORE_ASYNC_BATCH_BYTES" "METASTORE_FEED_BUFFER_BYTES" "METASTORE_READ_POOL_MAX" }}
{{- range .Values.extraEnv }}
{{- if hasKey $fromValues .name }}
{{- fail (printf "extraEnv sets %s, which the chart derives from %s and counts in the memory limit's check (docs/operations.md, \"Sizing\"): set %s instead" .name (get $fromValues .name) (get $fromValues .name)) }}
{{- end }}
{{- if has .name $atDefault }}
{{- fail (printf "extraEnv sets %s, which the chart's memory limit check counts at the service's default (docs/operations.md, \"Sizing\"): the chart does not change it" .name) }}
{{- end }}
{{- end }}
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
{{- include "metastore.conninfoOf" (list $db.host $db.port $db.database $db.parameters "database.parameters") }}
{{- end }}

{{/* (list host port dbname parameters what): the key/value connection string of those parts. */}}
{{- define "metastore.conninfoOf" -}}
{{- $what := index . 4 }}
{{- $parts := dict "host" (index . 0) "port" (toString (index . 1)) "dbname" (index . 2) }}
{{- range $key, $value := index . 3 }}
{{- if has $key (list "user" "password" "host" "port" "dbname" "passfile") }}
{{- fail (printf "%s.%s: set it with database.host, port, database or the credentials Secret" $what $key) }}
{{- end }}
{{- if eq $key "application_name" }}
{{- fail (printf "%s.application_name: the service and the Jobs name themselves (metastore-server-*, metastore-migrate, metastore-retention)" $what) }}
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

{{/* The read replica's env of the server container (empty without one): METASTORE_READ_REPLICA_URL
from the parts (host and port; the database, parameters and credentials are the primary's) or
from an existing Secret, and METASTORE_READ_REPLICA_MAX_LAG_S. */}}
{{- define "metastore.readReplicaEnv" -}}
{{- $db := .Values.database }}
{{- $r := $db.readReplica }}
{{- if and $r.host $r.existingSecret }}
{{- fail "database.readReplica: set host (the parts) or existingSecret (a whole connection string), not both" }}
{{- end }}
{{- if $r.host }}
{{- if not $db.host }}
{{- fail "database.readReplica.host needs database.host: the replica is reached as the primary's role, with the credentials of database.credentialsSecret (a primary given by database.existingSecret has none to share: use database.readReplica.existingSecret)" }}
{{- end }}
{{- /* The primary's parameters apply, but not its target_session_attrs (read-write would refuse every standby). */}}
{{- $parameters := omit ($db.parameters | default dict) "target_session_attrs" }}
{{- $parameters = merge (deepCopy ($r.parameters | default dict)) $parameters }}
- name: METASTORE_READ_REPLICA_URL
  value: {{ include "metastore.conninfoOf" (list $r.host ($r.port | default $db.port) $db.database $parameters "database.readReplica.parameters") | quote }}
{{- else if $r.existingSecret }}
- name: METASTORE_READ_REPLICA_URL
  valueFrom:
    secretKeyRef:
      name: {{ $r.existingSecret }}
      key: {{ $r.key }}
{{- end }}
{{- if not (kindIs "invalid" $r.maxLagSeconds) }}
{{- if not (or $r.host $r.existingSecret) }}
{{- fail "database.readReplica.maxLagSeconds needs a replica: database.readReplica.host or database.readReplica.existingSecret" }}
{{- end }}
- name: METASTORE_READ_REPLICA_MAX_LAG_S
  value: {{ $r.maxLagSeconds | int64 | quote }}
{{- end }}
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
{{- if $root.Values.database.credentialsAsFiles }}
{{- /* The mounted Secret's files, read at each new connection (a rotated Secret needs no restart). */}}
{{- $dir := include "metastore.credentialsDir" (ternary "migrations" "database" (contains "ADMIN" $envName)) }}
- name: {{ trimSuffix "_URL" $envName }}_USER_FILE
  value: {{ printf "%s/username" $dir }}
- name: {{ trimSuffix "_URL" $envName }}_PASSWORD_FILE
  value: {{ printf "%s/password" $dir }}
{{- else }}
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
{{- end }}
{{- else }}
{{- if $root.Values.database.credentialsAsFiles }}
{{- fail "database.credentialsAsFiles needs database.host and credentials Secrets (keys username and password): a Secret holding a whole connection string is passed as a variable" }}
{{- end }}
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

{{/* Seconds: what Kubernetes waits after SIGTERM (the preStop sleep counts against it): the sleep,
the service's drain (config.shutdownGraceS) and a tenth of it, at least 5 s, for the process to
exit after its drain. */}}
{{- define "metastore.terminationGracePeriodSeconds" -}}
{{- $grace := int .Values.config.shutdownGraceS }}
{{- $floor := add .Values.lifecycle.preStopSleepSeconds $grace }}
{{- $value := .Values.terminationGracePeriodSeconds | default (add $floor (max 5 (div $grace 10))) }}
{{- if le (int $value) (int $floor) }}
{{- fail (printf "terminationGracePeriodSeconds=%v must exceed lifecycle.preStopSleepSeconds + config.shutdownGraceS (%v)" $value $floor) }}
{{- end }}
{{- $value }}
{{- end }}

{{/* The spool's sizes, in bytes, from spool.size: maxBytes (METASTORE_SPOOL_MAX_BYTES), the
emptyDir's sizeLimit (a quarter more, at least 64Mi: a segment being written, records set aside),
and the ephemeral-storage the server container requests (the spool's, /tmp's and the log's). */}}
{{- define "metastore.spool" -}}
{{- if not (kindIs "invalid" .Values.spool.sizeLimit) }}
{{- fail "spool.sizeLimit is derived from spool.size now: set spool.size, the most the spool holds (METASTORE_SPOOL_MAX_BYTES)" }}
{{- end }}
{{- $max := include "metastore.bytes" .Values.spool.size | int64 }}
{{- if lt $max 1048576 }}
{{- fail (printf "spool.size=%v is below 1Mi, the least METASTORE_SPOOL_MAX_BYTES may be" .Values.spool.size) }}
{{- end }}
{{- $limit := add $max (max (div $max 4) 67108864) }}
{{- $ephemeral := add $limit (include "metastore.bytes" .Values.tmpSizeLimit | int64) }}
{{- if .Values.logging.vectorAggregatorConfigMapName }}
{{- $ephemeral = add $ephemeral (include "metastore.bytes" .Values.logging.sizeLimit | int64) }}
{{- end }}
{{- dict "maxBytes" $max "sizeLimit" $limit "ephemeralStorage" $ephemeral | toJson }}
{{- end }}

{{/* Where a credentials Secret is mounted with database.credentialsAsFiles. */}}
{{- define "metastore.credentialsDir" -}}
/stackable/secrets/{{ . }}
{{- end }}

{{- define "metastore.credentialsVolume" -}}
{{- $name := index . 0 }}{{- $secret := index . 1 }}
- name: {{ $name }}-credentials
  secret:
    secretName: {{ $secret }}
    defaultMode: 0440
    items:
      - key: username
        path: username
      - key: password
        path: password
{{- end }}

{{/* Seconds of a Stackable duration (6h, 1d12h, 30m, 90s). */}}
{{- define "metastore.durationSeconds" -}}
{{- $text := toString . }}
{{- $parts := regexFindAll "[0-9]+[dhms]" $text -1 }}
{{- if or (not $parts) (ne (join "" $parts) $text) }}
{{- fail (printf "%q is not a duration this chart understands (e.g. 6h, 1d12h, 30m)" $text) }}
{{- end }}
{{- $units := dict "d" 86400 "h" 3600 "m" 60 "s" 1 }}
{{- $total := 0 }}
{{- range $parts }}
{{- $unit := regexFind "[dhms]$" . }}
{{- $total = add $total (mul (trimSuffix $unit . | int64) (get $units $unit)) }}
{{- end }}
{{- $total }}
{{- end }}
