{{/*
fullname: fullnameOverride, else the release name when it contains the
chart's name (release "topoalign" gives deploy/'s names), else
"<release>-<name>"; at most 63 characters less the longest suffix.
*/}}
{{- define "topoalign.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "topoalign.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/*
labels (dict "ctx" $ "own" (dict ...)): an object's labels as YAML, its
own and then commonLabels (own ones win); empty when there are none.
*/}}
{{- define "topoalign.labels" -}}
{{- $labels := merge (dict) (.own | default dict) (.ctx.Values.commonLabels | default dict) -}}
{{- if $labels -}}
{{- toYaml $labels -}}
{{- end -}}
{{- end -}}

{{- define "topoalign.image" -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- end -}}

{{- define "topoalign.follower.name" -}}
{{- printf "%s-follower" (include "topoalign.fullname" .) -}}
{{- end -}}

{{- define "topoalign.follower.serviceAccountName" -}}
{{- default (include "topoalign.follower.name" .) .Values.follower.serviceAccount.name -}}
{{- end -}}

{{- define "topoalign.agent.name" -}}
{{- printf "%s-agent" (include "topoalign.fullname" .) -}}
{{- end -}}

{{- define "topoalign.extender.name" -}}
{{- printf "%s-extender" (include "topoalign.fullname" .) -}}
{{- end -}}

{{- define "topoalign.scheduler.name" -}}
{{- printf "%s-scheduler" (include "topoalign.fullname" .) -}}
{{- end -}}

{{- define "topoalign.serve.name" -}}
{{- printf "%s-serve" (include "topoalign.fullname" .) -}}
{{- end -}}
