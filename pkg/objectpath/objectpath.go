// Package objectpath parses the field paths a policy declares for the
// objects it reads (policies[].objects[].fields) and reads them out of an
// object's JSON form. A path is field names joined by dots, with [key]
// for a map key that a dot would split: spec.renewTime,
// metadata.labels[topology.kubernetes.io/zone]. Parsing is done once, at
// validation and load; a read walks the parsed steps, so a policy pays for
// the fields it declared and nothing else.
package objectpath

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Bounds of a path.
const (
	MaxPathLength = 256
	MaxSteps      = 16
)

// Path is a parsed field path: the map keys to follow, in order.
type Path []string

// Parse parses a field path, or says what is wrong with it and how it
// should look.
func Parse(s string) (Path, error) {
	if s == "" {
		return nil, fmt.Errorf("empty: write the field's path, such as spec.renewTime")
	}
	if len(s) > MaxPathLength {
		return nil, fmt.Errorf("%d bytes, more than %d", len(s), MaxPathLength)
	}
	var p Path
	for i := 0; i < len(s); {
		switch {
		case s[i] == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("the [ at byte %d is not closed: write [key] for a map key, such as metadata.labels[app]", i)
			}
			key := s[i+1 : i+end]
			if key == "" {
				return nil, fmt.Errorf("empty [] at byte %d: write the map key inside, such as metadata.labels[app]", i)
			}
			p = append(p, key)
			i += end + 1
		case len(p) > 0 && s[i] != '.':
			return nil, fmt.Errorf("byte %d (%q) follows a field without a dot: write names joined by dots, such as spec.holderIdentity", i, s[i])
		default:
			if len(p) > 0 {
				i++ // the dot
			}
			if i == len(s) || !isNameStart(s[i]) {
				return nil, fmt.Errorf("byte %d does not start a field name: names are letters, digits and _, joined by dots, such as spec.holderIdentity", i)
			}
			j := i
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			p = append(p, s[i:j])
			i = j
		}
		if len(p) > MaxSteps {
			return nil, fmt.Errorf("more than %d steps", MaxSteps)
		}
	}
	return p, nil
}

func isNameStart(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

func isNameByte(b byte) bool { return isNameStart(b) || b >= '0' && b <= '9' }

// Under reports whether p is q or a field under it.
func (p Path) Under(q Path) bool {
	if len(p) < len(q) {
		return false
	}
	for i := range q {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// Read returns the value at p in obj (an object's JSON form, as
// encoding/json or an unstructured object holds it): a string as it is,
// another scalar as its JSON text, a list or map as compact JSON, and ""
// with found false when the path leads nowhere.
func (p Path) Read(obj map[string]any) (value string, found bool) {
	var cur any = obj
	for _, step := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		if cur, ok = m[step]; !ok {
			return "", false
		}
	}
	switch v := cur.(type) {
	case nil:
		return "", true
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return "", false
	}
	return string(b), true
}
