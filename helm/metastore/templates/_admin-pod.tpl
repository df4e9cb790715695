{{/* The pod template of the chart's Jobs (migrations, retention): `metastore db ...` as the
schema's owner. Called with (dict "root" $ "component" "migrations" "args" (list ...) "job" $values). */}}
{{- define "metastore.adminPod" -}}
{{- $root := .root }}
{{- $job := .job }}
{{- $caBundle := include "metastore.caBundleEnabled" $root }}
metadata:
  labels:
    {{- include "metastore.componentLabels" (dict "root" $root "component" .component "extra" $root.Values.podLabels) | nindent 4 }}
  {{- with merge (deepCopy ($job.podAnnotations | default dict)) ($root.Values.podAnnotations | default dict) }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  restartPolicy: Never
  {{- with $root.Values.migrations.serviceAccountName }}
  serviceAccountName: {{ . }}
  {{- end }}
  automountServiceAccountToken: false
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  {{- with $root.Values.extraInitContainers }}
  initContainers:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ .component }}
      image: {{ include "metastore.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        {{- toYaml .args | nindent 8 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      env:
        {{- include "metastore.databaseEnv" (list $root "METASTORE_ADMIN_DATABASE_URL" $root.Values.migrations.credentialsSecret $root.Values.migrations.existingSecret $root.Values.migrations.key "migrations.existingSecret") | trim | nindent 8 }}
        - name: METASTORE_LOG_LEVEL
          value: {{ $root.Values.logging.level | quote }}
        - name: METASTORE_ADMIN_CONNECT_TIMEOUT_S
          value: {{ $root.Values.migrations.connectTimeoutS | int64 | quote }}
        - name: METASTORE_ADMIN_STATEMENT_TIMEOUT_S
          value: {{ $job.statementTimeoutS | default $root.Values.migrations.statementTimeoutS | int64 | quote }}
        {{- with $job.allowedConnectRoles }}
        - name: METASTORE_ALLOWED_CONNECT_ROLES
          value: {{ join "," . | quote }}
        {{- end }}
        {{- with include "metastore.libpqEnv" $root | trim }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- with $root.Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $job.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      resources:
        {{- include "metastore.resources" $job.resources | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if $root.Values.database.credentialsAsFiles }}
        - name: migrations-credentials
          mountPath: {{ include "metastore.credentialsDir" "migrations" }}
          readOnly: true
        {{- end }}
        {{- if $caBundle }}
        - name: pg-ca
          mountPath: /stackable/pg-ca
          readOnly: true
        {{- end }}
        {{- with $root.Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    {{- with $root.Values.extraContainers }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: {{ $root.Values.tmpSizeLimit }}
    {{- if $root.Values.database.credentialsAsFiles }}
    {{- include "metastore.credentialsVolume" (list "migrations" $root.Values.migrations.credentialsSecret) | nindent 4 }}
    {{- end }}
    {{- if $caBundle }}
    {{- include "metastore.caBundleVolume" $root | trim | nindent 4 }}
    {{- end }}
    {{- with $root.Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- include "metastore.podExtras" $root | nindent 2 }}
{{- end }}
