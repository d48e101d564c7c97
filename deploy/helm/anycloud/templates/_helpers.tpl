{{/* Names: <release>-anycloud unless the release name already says anycloud. */}}
{{- define "anycloud.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "anycloud.fullname" -}}
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

{{- define "anycloud.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "anycloud.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component (control-plane, operator): never change them, a
Deployment's selector is immutable. */}}
{{- define "anycloud.selector" -}}
app.kubernetes.io/name: {{ include "anycloud.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "anycloud.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "anycloud.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "anycloud.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The namespaces the operator watches: watchNamespaces, else the release's. */}}
{{- define "anycloud.watchNamespaces" -}}
{{- $list := .Values.watchNamespaces | default (list .Release.Namespace) }}
{{- toJson (uniq $list) }}
{{- end }}

{{- define "anycloud.ledgerSecret" -}}
{{- if .Values.ledger.existingSecret }}
{{- .Values.ledger.existingSecret }}
{{- else if .Values.ledger.url }}
{{- printf "%s-ledger" (include "anycloud.fullname" .) }}
{{- else }}
{{- fail "set ledger.existingSecret (a Secret holding the PostgreSQL URL) or ledger.url" }}
{{- end }}
{{- end }}

{{- define "anycloud.ledgerKey" -}}
{{- if .Values.ledger.existingSecret }}{{ .Values.ledger.existingSecretKey }}{{ else }}url{{ end }}
{{- end }}

{{- define "anycloud.configPath" -}}/etc/anycloud/config.yaml{{- end }}
{{- define "anycloud.home" -}}/var/lib/anycloud{{- end }}

{{/* Environment both processes share: where home is, the ledger, the config file. */}}
{{- define "anycloud.commonEnv" -}}
- name: ANYCLOUD_HOME
  value: {{ include "anycloud.home" . }}
- name: HOME
  value: {{ include "anycloud.home" . }}
- name: ANYCLOUD_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "anycloud.ledgerSecret" . }}
      key: {{ include "anycloud.ledgerKey" . }}
{{- end }}
