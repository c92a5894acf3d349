package main

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// yaml writes values.yaml: the base's settings, with what the templates
// derive (the release's namespace, the full name) left out.
func (v *values) yaml() ([]byte, error) {
	cfg := v.config
	profiles := cfg["profiles"].([]any)
	if len(profiles) != 1 {
		return nil, fmt.Errorf("the base's config has %d profiles; the chart makes one", len(profiles))
	}
	prof := profiles[0].(obj)
	pcs := prof["pluginConfig"].([]any)
	if len(pcs) != 1 || pcs[0].(obj)["name"] != "WasmPolicy" {
		return nil, fmt.Errorf("the base's profile configures %d plugins; the chart configures WasmPolicy", len(pcs))
	}
	args := pcs[0].(obj)["args"].(obj)
	policies := args["policies"]
	delete(args, "policies")
	le := cfg["leaderElection"].(obj)
	if le["resourceNamespace"] != baseName || le["resourceName"] != baseName {
		return nil, fmt.Errorf("the base's leader election Lease is not %s/%s, which the chart derives", baseName, baseName)
	}
	delete(le, "resourceNamespace")
	delete(le, "resourceName")
	if po, ok := args["policyObjects"].(obj); ok {
		if l, ok := po["statusLease"].(obj); ok {
			if l["namespace"] != baseName || l["name"] != baseName+"-policy-status" {
				return nil, fmt.Errorf("the base's status Lease is not the one the chart derives")
			}
			delete(po, "statusLease")
		}
	}
	// A policy's ConfigMap in the base's namespace is in the release's.
	if list, ok := policies.([]any); ok {
		for _, p := range list {
			if cm, ok := p.(obj)["source"].(obj)["configMap"].(obj); ok && cm["namespace"] == baseName {
				delete(cm, "namespace")
			}
		}
	}
	image := v.image
	i := strings.LastIndex(image, ":")
	section := func(comment string, key string, val any) (string, error) {
		b, err := yaml.Marshal(map[string]any{key: val})
		if err != nil {
			return "", err
		}
		return comment + string(b) + "\n", nil
	}
	var out strings.Builder
	out.WriteString(header + "# Each value defaults to what manifests/base sets.\n\n")
	parts := []struct {
		comment, key string
		val          any
	}{
		{"# The kube-scheduler image with WasmPolicy (make image; make image-push).\n# tag \"\" picks the build line that serves the cluster's Kubernetes minor\n# (" + v.lines.describe() + "; other minors are refused);\n# set it to pin a build. pullPolicy defaults to the cluster's default.\n", "image", obj{"repository": image[:i], "tag": "", "pullPolicy": ""}},
		{"# Secrets to pull the image with.\n", "imagePullSecrets", []any{}},
		{"# Replicas run with leader election: one schedules, the others wait.\n", "replicas", v.replicas},
		{"# limits.memory holds args.memoryBudget (default 512Mi) and the scheduler\n# itself (at least 256Mi): the chart refuses less (README, sizing the memory).\n", "resources", v.resources},
		{"", "nodeSelector", obj{}},
		{"", "tolerations", []any{}},
		{"# rbac.create: false leaves out every ClusterRole, Role and binding.\n", "rbac", obj{"create": true}},
		{"# The profile's schedulerName: pods opt in with spec.schedulerName.\n", "schedulerName", prof["schedulerName"]},
		{"# KubeSchedulerConfiguration leaderElection. Its Lease is in the release's\n# namespace, named resourceName (default: the release's full name).\n", "leaderElection", le},
		{"", "plugins", prof["plugins"]},
		{"# The WasmPolicy args (README, args reference) but policies. The policy\n# objects' status Lease is in the release's namespace, named\n# policyObjects.statusLease.name (default: <full name>-policy-status).\n", "args", args},
		{"# The WasmPolicy args' policies. A configMap source or an oci pullSecret\n# without a namespace is in the release's; the Role lets the scheduler read\n# the ConfigMaps and pull Secrets they name there, by name.\n", "policies", policies},
	}
	for _, p := range parts {
		s, err := section(p.comment, p.key, p.val)
		if err != nil {
			return nil, err
		}
		out.WriteString(s)
	}
	return []byte(strings.TrimRight(out.String(), "\n") + "\n"), nil
}

// helpers are the chart's named templates.
const helpers = header + `{{/* The prefix of every name: the release name, or fullnameOverride. */}}
{{- define "wasmsched.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end }}

{{/* The leader election Lease's name, in the release's namespace. */}}
{{- define "wasmsched.leaderLease" -}}
{{- .Values.leaderElection.resourceName | default (include "wasmsched.fullname" .) -}}
{{- end }}

{{/* The policy objects' status Lease's name, in the release's namespace. */}}
{{- define "wasmsched.statusLease" -}}
{{- dig "policyObjects" "statusLease" "name" "" .Values.args | default (printf "%s-policy-status" (include "wasmsched.fullname" .)) -}}
{{- end }}

{{/* Bytes of a memory quantity (plain bytes, or Ki, Mi, Gi, Ti, k, M, G, T). */}}
{{- define "wasmsched.bytes" -}}
{{- $q := toString . -}}
{{- $digits := regexFind "^[0-9]+" $q -}}
{{- $units := dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $unit := trimPrefix $digits $q -}}
{{- if or (not $digits) (not (hasKey $units $unit)) -}}
{{- fail (printf "%q: the chart compares memory quantities written as whole bytes, Ki, Mi, Gi, Ti, k, M, G or T (for example 1536Mi, not 1.5Gi)" $q) -}}
{{- end -}}
{{- mul (int64 $digits) (get $units $unit) -}}
{{- end }}

{{/* The container's memory limit must hold args.memoryBudget (default 512Mi)
and the scheduler itself (256Mi, the floor WasmPolicy checks at start). */}}
{{- define "wasmsched.checkMemory" -}}
{{- $limit := dig "limits" "memory" "" (.Values.resources | default dict) -}}
{{- if $limit -}}
{{- $budget := .Values.args.memoryBudget | default "512Mi" -}}
{{- if gt (add (int64 (include "wasmsched.bytes" $budget)) 268435456) (int64 (include "wasmsched.bytes" $limit)) -}}
{{- fail (printf "args.memoryBudget (%s) does not fit resources.limits.memory (%s): the scheduler itself needs at least 256Mi beside the policies' budget, which could then take the container past its limit (an OOM kill); lower args.memoryBudget or raise resources.limits.memory" (toString $budget) (toString $limit)) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The KubeSchedulerConfiguration: one profile with the WasmPolicy args. */}}
{{- define "wasmsched.config" -}}
{{- include "wasmsched.checkMemory" . -}}
{{- $le := deepCopy .Values.leaderElection -}}
{{- if and $le.resourceNamespace (ne $le.resourceNamespace .Release.Namespace) -}}
{{- fail "leaderElection.resourceNamespace: the chart's Role covers Leases in the release's namespace only" -}}
{{- end -}}
{{- $_ := set $le "resourceNamespace" .Release.Namespace -}}
{{- $_ := set $le "resourceName" (include "wasmsched.leaderLease" .) -}}
{{- if and (gt (int .Values.replicas) 1) (not $le.leaderElect) -}}
{{- fail "replicas > 1 needs leaderElection.leaderElect: true" -}}
{{- end -}}
{{- $args := deepCopy .Values.args -}}
{{- if and $args.policyObjects $args.policyObjects.enabled -}}
{{- $lease := deepCopy ($args.policyObjects.statusLease | default dict) -}}
{{- if and $lease.namespace (ne $lease.namespace .Release.Namespace) -}}
{{- fail "args.policyObjects.statusLease.namespace: the chart's Role covers Leases in the release's namespace only" -}}
{{- end -}}
{{- $_ := set $lease "namespace" .Release.Namespace -}}
{{- $_ := set $lease "name" (include "wasmsched.statusLease" .) -}}
{{- $_ := set $args.policyObjects "statusLease" $lease -}}
{{- end -}}
{{- $policies := list -}}
{{- range (.Values.policies | default list) -}}
{{- $p := deepCopy . -}}
{{- $src := $p.source | default dict -}}
{{- if and $src.configMap (not $src.configMap.namespace) }}{{- $_ := set $src.configMap "namespace" $.Release.Namespace }}{{- end -}}
{{- if and $src.oci $src.oci.pullSecret (not $src.oci.pullSecret.namespace) }}{{- $_ := set $src.oci.pullSecret "namespace" $.Release.Namespace }}{{- end -}}
{{- $policies = append $policies $p -}}
{{- end -}}
{{- $_ := set $args "policies" $policies -}}
{{- $profile := dict "schedulerName" .Values.schedulerName "plugins" .Values.plugins "pluginConfig" (list (dict "name" "WasmPolicy" "args" $args)) -}}
{{- toYaml (dict "apiVersion" "kubescheduler.config.k8s.io/v1" "kind" "KubeSchedulerConfiguration" "leaderElection" $le "profiles" (list $profile)) -}}
{{- end }}

{{/* The ConfigMaps the policies read in the release's namespace, as JSON. */}}
{{- define "wasmsched.policyConfigMaps" -}}
{{- $names := list -}}
{{- range .Values.policies -}}
{{- $cm := (.source | default dict).configMap -}}
{{- if and $cm (eq ($cm.namespace | default $.Release.Namespace) $.Release.Namespace) -}}
{{- $names = append $names $cm.name -}}
{{- end -}}
{{- end -}}
{{- toJson ($names | uniq) -}}
{{- end }}

{{/* The pull Secrets of the policies' oci sources in the release's namespace, as JSON. */}}
{{- define "wasmsched.pullSecrets" -}}
{{- $names := list -}}
{{- range .Values.policies -}}
{{- $oci := (.source | default dict).oci -}}
{{- if and $oci $oci.pullSecret (eq ($oci.pullSecret.namespace | default $.Release.Namespace) $.Release.Namespace) -}}
{{- $names = append $names $oci.pullSecret.name -}}
{{- end -}}
{{- end -}}
{{- toJson ($names | uniq) -}}
{{- end }}
`

// objectsRBAC lets the scheduler get, list and watch the kinds
// args.objects grants policies: a Role and RoleBinding in each namespace
// a grant names, or a ClusterRole and ClusterRoleBinding for a grant of
// every namespace. Without grants it renders nothing.
const objectsRBAC = header + `{{- if .Values.rbac.create }}
{{- range $g := (.Values.args.objects | default list) }}
{{- $gv := splitList "/" $g.apiVersion }}
{{- $group := "" }}
{{- if eq (len $gv) 2 }}{{ $group = first $gv }}{{ end }}
{{- if has (printf "%s/%s" $group $g.resource) (list "/secrets" "/serviceaccounts" "certificates.k8s.io/certificatesigningrequests") }}
{{- fail (printf "args.objects: %s (%s) may not be granted: it holds credentials, and a policy's reasons reach pods' events" $g.kind $g.resource) }}
{{- end }}
{{- $name := printf "%s-read-%s" (include "wasmsched.fullname" $) (trimSuffix "." (printf "%s.%s" $g.resource $group)) }}
{{- if $g.namespaces }}
{{- range $ns := $g.namespaces }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
rules:
- apiGroups: [{{ $group | quote }}]
  resources: [{{ $g.resource | quote }}]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
- kind: ServiceAccount
  name: {{ include "wasmsched.fullname" $ }}
  namespace: {{ $.Release.Namespace }}
{{- end }}
{{- else }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
rules:
- apiGroups: [{{ $group | quote }}]
  resources: [{{ $g.resource | quote }}]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
- kind: ServiceAccount
  name: {{ include "wasmsched.fullname" $ }}
  namespace: {{ $.Release.Namespace }}
{{- end }}
{{- end }}
{{- end }}
`
