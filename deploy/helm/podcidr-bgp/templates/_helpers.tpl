{{/*
The recommended labels kustomize puts on every object and pod template of deploy/
(deploy/kustomization.yaml, `labels:`), with Helm as the manager. No helm.sh/chart label:
the render equals the kustomize install but for app.kubernetes.io/managed-by. Selectors carry
only app.kubernetes.io/name, as in deploy/ (a selector cannot change on upgrade).
*/}}
{{- define "podcidr-bgp.labels" -}}
app.kubernetes.io/part-of: podcidr-bgp
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The image of both workloads: image.tag, else the chart's appVersion. */}}
{{- define "podcidr-bgp.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
