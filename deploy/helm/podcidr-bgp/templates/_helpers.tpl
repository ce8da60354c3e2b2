{{/* The labels kustomize puts on every object of deploy/ (managed-by: Helm here). */}}
{{- define "podcidr-bgp.labels" -}}
app.kubernetes.io/part-of: podcidr-bgp
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The speaker's and the allocator's image. */}}
{{- define "podcidr-bgp.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* imagePullPolicy, when set. */}}
{{- define "podcidr-bgp.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}
