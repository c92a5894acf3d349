package sdk

import "strings"

// ParseConfig parses the common "key=value" config format: pairs separated
// by commas or newlines, surrounding spaces ignored, "#" starting a comment
// line. A bare word without "=" maps to "". Policies are free to use any
// other format; Config returns the raw string.
func ParseConfig(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ',' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m
}
