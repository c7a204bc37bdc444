{{/* The NFs of the chart, in start order (the NRF first: the others register with it). */}}
{{- define "fivecore.nfs" -}}
nrf udr bsf pcf dd
{{- end -}}

{{- define "fivecore.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* fivecore.name: the resource name of one NF's component. dict "root" $ "nf" "bsf" */}}
{{- define "fivecore.name" -}}
{{- printf "%s-%s" (include "fivecore.fullname" .root) .nf -}}
{{- end -}}

{{- define "fivecore.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .nf }}
{{- end -}}

{{- define "fivecore.labels" -}}
{{ include "fivecore.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* Whether this NF keeps its state on the MySQL-protocol backend (every NF does when
store.backend is mysql). */}}
{{- define "fivecore.mysql" -}}
{{- if eq .root.Values.store.backend "mysql" -}}true{{- end -}}
{{- end -}}

{{/*
Whether this NF's pods get a PVC (a volumeClaimTemplate `data`): on SQLite every NF, for its
store; on MySQL only the Data Director in the embedded mode, for its message log alone (the copies
its ingest API acknowledged and its feeds have not delivered yet, MAIN and the feeds' offsets:
an emptyDir would lose them when the pod is rescheduled). With dd.log.volume=emptyDir (the Kafka
mode, [dd.kafka] in dd.toml, where the log is Kafka's) it keeps nothing on disk either.
*/}}
{{- define "fivecore.pvc" -}}
{{- if not (include "fivecore.mysql" .) -}}true
{{- else if and (eq .nf "dd") (eq .root.Values.dd.log.volume "pvc") -}}true
{{- end -}}
{{- end -}}

{{- define "fivecore.storeSecret" -}}
{{- if .Values.store.mysql.existingSecret -}}
{{- .Values.store.mysql.existingSecret -}}
{{- else -}}
{{- printf "%s-store" (include "fivecore.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The Diameter port of an NF, when it serves one: "name port" or empty. */}}
{{- define "fivecore.diameterPort" -}}
{{- $v := index .root.Values .nf -}}
{{- if and (eq .nf "udr") $v.sh.enabled -}}sh {{ $v.sh.port }}
{{- else if and (eq .nf "bsf") $v.rx.enabled -}}rx {{ $v.rx.port }}
{{- else if and (eq .nf "pcf") $v.diameter.enabled -}}gx-rx {{ $v.diameter.port }}
{{- end -}}
{{- end -}}

{{/*
The NF's fivecore TOML (crates/fivecore/src/config.rs reads it; unknown keys are errors). The
[sbi] listen address comes from the pod's IP on the command line (--listen), so the NF
advertises a reachable address to the NRF. The [store] table is not here: SQLite is the default
(tune it in commonToml or the NF's toml), and on the MySQL backend the whole table comes from the
Secret, which the init container appends.
*/}}
{{- define "fivecore.toml" -}}
{{- $root := .root -}}
{{- $nf := .nf -}}
{{- $v := index $root.Values $nf -}}
# fivecore configuration of the {{ $nf | upper }}, rendered by the Helm chart {{ $root.Chart.Name }}-{{ $root.Chart.Version }}.
{{- with $root.Values.commonToml }}
{{ . }}
{{- end }}
{{- if and $root.Values.registerWithNrf $root.Values.nrf.enabled (has $nf (list "udr" "bsf" "pcf")) }}

[{{ $nf }}.nrf]
api_roots = ["http://{{ include "fivecore.name" (dict "root" $root "nf" "nrf") }}:{{ $root.Values.nrf.sbiPort }}"]
{{- end }}
{{- if eq $nf "udr" }}

[udr.sh]
enabled = {{ $v.sh.enabled }}
listen = "0.0.0.0:{{ $v.sh.port }}"
origin_host = {{ $v.sh.originHost | quote }}
origin_realm = {{ $v.sh.originRealm | quote }}
{{- end }}
{{- if eq $nf "bsf" }}

[bsf.rx]
enabled = {{ $v.rx.enabled }}
listen = "0.0.0.0:{{ $v.rx.port }}"
origin_host = {{ $v.rx.originHost | quote }}
origin_realm = {{ $v.rx.originRealm | quote }}
{{- end }}
{{- if eq $nf "pcf" }}

[pcf.diameter]
enabled = {{ $v.diameter.enabled }}
listen = "0.0.0.0:{{ $v.diameter.port }}"
origin_host = {{ $v.diameter.originHost | quote }}
origin_realm = {{ $v.diameter.originRealm | quote }}
{{- end }}
{{- with $v.toml }}

{{ . }}
{{- end }}
{{- end -}}
