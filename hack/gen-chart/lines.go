package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/wasmsched/wasmsched/internal/k8slines"
)

// minorsFile lists the Kubernetes minors wasmsched supports: the chart
// serves exactly these, and hack/verify-k8s.sh fails when one has no
// build line that may run against it.
const minorsFile = "hack/k8s-minors.txt"

// lineImages maps each supported minor ("1.36") to the image tag of the
// build line that serves it.
type lineImages map[string]string

// readLines pairs each supported minor with a build line: the line of the
// same minor, or else the one a minor older (kube-scheduler may be one
// minor older than kube-apiserver, never newer). A minor no line serves is
// an error: the chart must not offer a cluster a build it may not run.
func readLines() (lineImages, error) {
	lines, err := k8slines.Read(".")
	if err != nil {
		return nil, err
	}
	byMinor := map[int]string{} // a line's minor -> its image tag
	for _, l := range lines {
		minor, _ := strconv.Atoi(l.Minor)
		byMinor[minor] = l.Kubernetes + "-wasmsched"
	}
	supported, err := readMinors()
	if err != nil {
		return nil, err
	}
	out := lineImages{}
	for _, minor := range supported {
		tag, ok := byMinor[minor]
		if !ok {
			tag, ok = byMinor[minor-1]
		}
		if !ok {
			return nil, fmt.Errorf("%s: no build line serves Kubernetes 1.%d (add one: docs/kubernetes.md, Adding a line)", minorsFile, minor)
		}
		out[fmt.Sprintf("1.%d", minor)] = tag
	}
	return out, nil
}

// readMinors reads minorsFile: one minor (1.MINOR) per line, # comments.
func readMinors() ([]int, error) {
	f, err := os.Open(minorsFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var minors []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.SplitN(sc.Text(), "#", 2)[0])
		if line == "" {
			continue
		}
		field := strings.Fields(line)[0]
		m, err := strconv.Atoi(strings.TrimPrefix(field, "1."))
		if err != nil || !strings.HasPrefix(field, "1.") {
			return nil, fmt.Errorf("%s: %q is not a minor like 1.36", minorsFile, field)
		}
		minors = append(minors, m)
	}
	sort.Ints(minors)
	if len(minors) == 0 {
		return nil, fmt.Errorf("%s lists no minor", minorsFile)
	}
	return minors, sc.Err()
}

// keys returns the minors in order.
func (l lineImages) keys() []string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(keys[i], "1."))
		b, _ := strconv.Atoi(strings.TrimPrefix(keys[j], "1."))
		return a < b
	})
	return keys
}

// describe is the pairs for values.yaml's comment.
func (l lineImages) describe() string {
	var parts []string
	for _, k := range l.keys() {
		parts = append(parts, k+": "+l[k])
	}
	return strings.Join(parts, ", ")
}

// helper is the named template wasmsched.image: image.tag when set, else
// the tag of the line serving .Capabilities.KubeVersion, else a failure
// that names the range the chart serves.
func (l lineImages) helper() string {
	keys := l.keys()
	var dict []string
	for _, k := range keys {
		dict = append(dict, fmt.Sprintf("%q %q", k, l[k]))
	}
	return `
{{/* The scheduler image: image.tag when set, else the build line that
serves the cluster's minor (generated from the module files and
` + minorsFile + `), else a refusal naming the minors served. */}}
{{- define "wasmsched.image" -}}
{{- $tag := .Values.image.tag -}}
{{- if not $tag -}}
{{- $lines := dict ` + strings.Join(dict, " ") + ` -}}
{{- $kv := .Capabilities.KubeVersion -}}
{{- $minor := printf "%s.%s" (trimSuffix "+" $kv.Major) (trimSuffix "+" $kv.Minor) -}}
{{- $tag = get $lines $minor -}}
{{- if not $tag -}}
{{- fail (printf "no wasmsched build serves Kubernetes %s: this chart serves Kubernetes ` + keys[0] + ` to ` + keys[len(keys)-1] + ` (kube-scheduler may be one minor older than kube-apiserver, never newer); run a supported minor, or set image.tag to pin a build yourself" $kv.Version) -}}
{{- end -}}
{{- end -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end }}
`
}
