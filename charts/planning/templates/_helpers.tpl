{{/*
Names, labels and the pod template shared by every workload of the chart.
*/}}

{{- define "planning.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, or the release name alone when it already contains the chart name. */}}
{{- define "planning.fullname" -}}
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

{{- define "planning.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The distributed services: process target (the --target value and the name suffix) to values key.
*/}}
{{- define "planning.components" -}}
gateway: gateway
issues: issues
agents-claims: agentsClaims
imports-exports: importsExports
audit: audit
{{- end }}

{{/* Name of one component's objects. Call with (dict "root" $ "component" "issues"). */}}
{{- define "planning.componentName" -}}
{{- if eq .component "all" }}
{{- include "planning.fullname" .root }}
{{- else }}
{{- printf "%s-%s" (include "planning.fullname" .root | trunc 47 | trimSuffix "-") .component }}
{{- end }}
{{- end }}

{{- define "planning.selectorLabels" -}}
app.kubernetes.io/name: {{ include "planning.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "planning.labels" -}}
helm.sh/chart: {{ include "planning.chart" . }}
{{ include "planning.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: planning-service
{{- end }}

{{/* Selector labels of one component. Call with (dict "root" $ "component" "issues"). */}}
{{- define "planning.componentSelectorLabels" -}}
{{ include "planning.selectorLabels" .root }}
app.kubernetes.io/component: {{ ternary "all-in-one" .component (eq .component "all") }}
{{- end }}

{{- define "planning.componentLabels" -}}
{{ include "planning.labels" .root }}
app.kubernetes.io/component: {{ ternary "all-in-one" .component (eq .component "all") }}
{{- end }}

{{/* The label that marks the metrics Services (and only them), for the ServiceMonitor. */}}
{{- define "planning.metricsServiceLabel" -}}
planning-metrics-service: "true"
{{- end }}

{{- define "planning.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "planning.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "planning.configMapName" -}}
{{- printf "%s-env" (include "planning.fullname" . | trunc 59 | trimSuffix "-") }}
{{- end }}

{{/* The Secret pods read: existingSecret, or the one this chart creates. */}}
{{- define "planning.secretName" -}}
{{- if .Values.existingSecret }}
{{- .Values.existingSecret }}
{{- else }}
{{- include "planning.fullname" . }}
{{- end }}
{{- end }}

{{/* Key of one secret value: the configured key in existingSecret, else the variable name. */}}
{{- define "planning.secretKey" -}}
{{- $defaults := dict "internalSecret" "SERVICE_INTERNAL_SECRET" "adminPassword" "SERVICE_ADMIN_PASSWORD" "mongodbUri" "MONGODB_URI" "redisUrl" "REDIS_URL" }}
{{- if .root.Values.existingSecret }}
{{- index .root.Values.existingSecretKeys .key | default (index $defaults .key) }}
{{- else }}
{{- index $defaults .key }}
{{- end }}
{{- end }}

{{/* The image reference: <repository>@<digest> when a digest is given, else <repository>:<tag>. */}}
{{- define "planning.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{/* OTEL_RESOURCE_ATTRIBUTES of one workload. Call with (dict "root" $ "component" c). */}}
{{- define "planning.otelResourceAttributes" -}}
{{- $root := .root }}
{{- $attrs := list "k8s.namespace.name=$(POD_NAMESPACE)" "k8s.pod.name=$(POD_NAME)" (printf "k8s.deployment.name=%s" (include "planning.componentName" .)) }}
{{- with $root.Values.otel.environment }}
{{- $attrs = append $attrs (printf "deployment.environment.name=%s" .) }}
{{- end }}
{{- with $root.Values.otel.resourceAttributes }}
{{- $attrs = append $attrs . }}
{{- end }}
{{- join "," $attrs }}
{{- end }}

{{/*
Default placement of a distributed service's replicas (scheduling.*), used when the service's
own affinity / topologySpreadConstraints are empty. Call with (dict "root" $ "component" c).
*/}}
{{- define "planning.defaultTopologySpread" -}}
{{- $spread := .root.Values.scheduling.topologySpread }}
{{- if $spread.enabled }}
{{- range $spread.topologyKeys }}
- maxSkew: {{ $spread.maxSkew }}
  topologyKey: {{ . }}
  whenUnsatisfiable: {{ $spread.whenUnsatisfiable }}
  labelSelector:
    matchLabels:
      {{- include "planning.componentSelectorLabels" $ | nindent 6 }}
{{- end }}
{{- end }}
{{- end }}

{{- define "planning.defaultAffinity" -}}
{{- $mode := .root.Values.scheduling.podAntiAffinity }}
{{- if eq $mode "soft" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "planning.componentSelectorLabels" . | nindent 12 }}
{{- else if eq $mode "hard" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "planning.componentSelectorLabels" . | nindent 10 }}
{{- end }}
{{- end }}

{{/* host:port of a service's gRPC endpoint (its headless Service), for the *_GRPC_URL variables. */}}
{{- define "planning.grpcAddress" -}}
{{- printf "%s-grpc:50051" (include "planning.componentName" .) }}
{{- end }}

{{/* SERVICE_COOKIE_SECURE: the explicit value, else whether the gateway ingress terminates TLS. */}}
{{- define "planning.cookieSecure" -}}
{{- if kindIs "bool" .Values.config.cookieSecure }}
{{- .Values.config.cookieSecure }}
{{- else }}
{{- and .Values.gateway.ingress.enabled (gt (len .Values.gateway.ingress.tls) 0) }}
{{- end }}
{{- end }}

{{/* Grace period: the readiness delay (rounded up to seconds) plus the drain budget. */}}
{{- define "planning.terminationGracePeriodSeconds" -}}
{{- add (div (add (int .Values.shutdown.delayMs) 999) 1000) (int .Values.shutdown.drainSeconds) }}
{{- end }}

{{/*
Changes to these values must restart pods, so their hash goes into a pod annotation. Left out on
purpose: generated secrets (kept across upgrades; hashing a freshly generated value would restart
every pod on every `helm template` render) and the admin password (read only on first start, and
a short password's hash is worth keeping out of pod metadata).
*/}}
{{- define "planning.secretChecksum" -}}
{{- $inputs := dict "existingSecret" .Values.existingSecret "keys" .Values.existingSecretKeys "internalSecret" .Values.secrets.internalSecret "mongodb" .Values.externalMongodb.uri "redis" .Values.externalRedis.url }}
{{- toJson $inputs | sha256sum }}
{{- end }}

{{/*
Environment variables a component reads from the Secret. Call with (dict "root" $ "component" c).
Distributed services share SERVICE_INTERNAL_SECRET and MONGODB_URI; the gateway also reads
SERVICE_ADMIN_PASSWORD and REDIS_URL. All-in-one reads only SERVICE_ADMIN_PASSWORD: it needs
no internal secret (one process) and uses embedded backends.
*/}}
{{- define "planning.secretEnv" -}}
{{- $root := .root }}
{{- $name := include "planning.secretName" $root -}}
{{- if ne .component "all" }}
- name: SERVICE_INTERNAL_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ $name }}
      key: {{ include "planning.secretKey" (dict "root" $root "key" "internalSecret") }}
- name: MONGODB_URI
  valueFrom:
    secretKeyRef:
      name: {{ $name }}
      key: {{ include "planning.secretKey" (dict "root" $root "key" "mongodbUri") }}
{{- end }}
{{- if or (eq .component "gateway") (eq .component "all") }}
- name: SERVICE_ADMIN_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $name }}
      key: {{ include "planning.secretKey" (dict "root" $root "key" "adminPassword") }}
      optional: true
{{- end }}
{{- if eq .component "gateway" }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $name }}
      key: {{ include "planning.secretKey" (dict "root" $root "key" "redisUrl") }}
      optional: true
{{- end }}
{{- end }}

{{/*
The pod template of one workload. Call with
(dict "root" $ "component" "issues" "values" .Values.issues "extraEnv" (dict ...) "dataVolume" (dict ...)).
"component" is the process target ("all" for all-in-one).
*/}}
{{- define "planning.podTemplate" -}}
{{- $root := .root }}
{{- $values := .values }}
{{- $selector := dict "root" $root "component" .component -}}
metadata:
  labels:
    {{- include "planning.componentLabels" $selector | nindent 4 }}
    {{- with $values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    checksum/secret: {{ include "planning.secretChecksum" $root }}
    {{- if $root.Values.metrics.podAnnotations }}
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ $root.Values.metrics.port | quote }}
    prometheus.io/path: /metrics
    {{- end }}
    {{- with $values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "planning.serviceAccountName" $root }}
  # The processes never call the Kubernetes API.
  automountServiceAccountToken: false
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  # No preStop hook: on SIGTERM the process itself fails readiness, waits SHUTDOWN_DELAY_MS for
  # endpoints to drop it, then drains. The grace period covers that delay plus the drain.
  terminationGracePeriodSeconds: {{ include "planning.terminationGracePeriodSeconds" $root }}
  containers:
    - name: {{ ternary "planning" .component (eq .component "all") }}
      image: {{ include "planning.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        - --target={{ .component }}
      ports:
        - name: http
          containerPort: 8080
          protocol: TCP
        - name: grpc
          containerPort: 50051
          protocol: TCP
        - name: metrics
          containerPort: {{ $root.Values.metrics.port }}
          protocol: TCP
      envFrom:
        - configMapRef:
            name: {{ include "planning.configMapName" $root }}
      env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: OTEL_RESOURCE_ATTRIBUTES
          value: {{ include "planning.otelResourceAttributes" $selector | quote }}
        {{- include "planning.secretEnv" $selector | trim | nindent 8 }}
        {{- range $key, $value := .extraEnv }}
        - name: {{ $key }}
          value: {{ $value | toString | quote }}
        {{- end }}
        {{- range $key, $value := $values.env }}
        - name: {{ $key }}
          value: {{ $value | toString | quote }}
        {{- end }}
        {{- with $values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      startupProbe:
        httpGet:
          path: /live
          port: http
        {{- toYaml $root.Values.probes.startup | nindent 8 }}
      livenessProbe:
        httpGet:
          path: /live
          port: http
        {{- toYaml $root.Values.probes.liveness | nindent 8 }}
      readinessProbe:
        httpGet:
          path: /ready
          port: http
        {{- toYaml $root.Values.probes.readiness | nindent 8 }}
      {{- with $values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if .dataVolume }}
        - name: data
          mountPath: /data
        {{- end }}
  volumes:
    # The root filesystem is read-only; Node and libraries may still write temporary files.
    - name: tmp
      emptyDir: {}
    {{- with .dataVolume }}
    - name: data
      {{- toYaml . | nindent 6 }}
    {{- end }}
  {{- with $values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- /* All-in-one runs one replica: nothing to spread. */}}
  {{- $affinity := $values.affinity | default (ternary "" (include "planning.defaultAffinity" $selector | trim) (eq .component "all")) }}
  {{- with $affinity }}
  affinity:
    {{- (kindIs "string" .) | ternary . (toYaml .) | nindent 4 }}
  {{- end }}
  {{- $spread := $values.topologySpreadConstraints | default (ternary "" (include "planning.defaultTopologySpread" $selector | trim) (eq .component "all")) }}
  {{- with $spread }}
  topologySpreadConstraints:
    {{- (kindIs "string" .) | ternary . (toYaml .) | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
Settings that the chart exposes as values of one service, as a YAML map of environment variables
for a workload. Call with (dict "root" $ "component" "gateway"); the all-in-one pod ("all") gets
every service's.
*/}}
{{- define "planning.serviceSettingsEnv" -}}
{{- $root := .root }}
{{- $env := dict }}
{{- if and (has .component (list "all" "gateway")) $root.Values.gateway.mcpAllowedOrigins }}
{{- $_ := set $env "MCP_ALLOWED_ORIGINS" (join "," $root.Values.gateway.mcpAllowedOrigins) }}
{{- end }}
{{- if and (has .component (list "all" "gateway")) $root.Values.gateway.publicUrl }}
{{- $_ := set $env "PUBLIC_URL" $root.Values.gateway.publicUrl }}
{{- end }}
{{- if and (has .component (list "all" "agents-claims")) (not (kindIs "invalid" $root.Values.agentsClaims.claimLeaseSeconds)) }}
{{- $_ := set $env "CLAIM_LEASE_SECONDS" (toString $root.Values.agentsClaims.claimLeaseSeconds) }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/*
One NetworkPolicy egress rule from networkPolicy.egress.<name>: its ports (TCP, plus UDP with
"udp") to its peers (none listed: any destination). Call with (dict "rule" $rule "udp" bool).
*/}}
{{- define "planning.egressRule" -}}
- ports:
    {{- range .rule.ports }}
    - port: {{ . }}
      protocol: TCP
    {{- if $.udp }}
    - port: {{ . }}
      protocol: UDP
    {{- end }}
    {{- end }}
  {{- with .rule.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
