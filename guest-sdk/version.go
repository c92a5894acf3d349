package sdk

import "strings"

// Version is a version number as Kubernetes parses one
// (k8s.io/apimachinery/pkg/util/version): a kubelet's "v1.37.2", a
// kernel's "6.8.0-1019-aws", a runtime's "1.7.22". Compare orders two.
type Version struct {
	// Components are the dot-separated numbers: 1, 37, 2.
	Components []uint64
	// PreRelease and BuildMetadata are a semantic version's "-rc.1" and
	// "+eks-1", without the sign; empty for a generic version.
	PreRelease, BuildMetadata string
	// Semantic is set when the string was a semantic version: exactly
	// three numbers, an optional pre-release and build metadata.
	Semantic bool
}

// ParseVersion parses s as Kubernetes' version.Parse does: as a semantic
// version, or failing that as a generic one (an optional "v", at least two
// dot-separated numbers, and anything after them ignored: "v1.30.0-eks-1"
// is 1.30.0 with pre-release "eks-1", "5.15.0-1019-aws" 5.15.0 with
// pre-release "1019-aws", "1.2.3.4-x" the generic 1.2.3.4). ok is false
// where version.Parse returns an error.
//
// A floor on kubelet versions meets the pre-release rule: vendors' kubelets
// report "v1.36.10-eks-113cf36" or "v1.36.10-gke.1200", which parse as
// pre-releases of 1.36.10 and so compare below "v1.36.10" (build metadata,
// "+k3s1", does not). Compare Release() for "this patch release or later,
// whatever the vendor suffix".
func ParseVersion(s string) (v Version, ok bool) {
	if v, ok = parseVersion(s, true); ok {
		return v, true
	}
	return parseVersion(s, false)
}

// space is what Go's regexp calls \s, which version.Parse's patterns use.
const space = " \t\n\f\r"

func parseVersion(s string, semantic bool) (Version, bool) {
	s = strings.TrimLeft(s, space)
	s = strings.TrimPrefix(s, "v")
	// The numbers: digits, then dot-digits as long as they come.
	end := digits(s, 0)
	if end == 0 {
		return Version{}, false
	}
	for end < len(s) && s[end] == '.' {
		next := digits(s, end+1)
		if next == end+1 {
			break
		}
		end = next
	}
	numbers, extra := s[:end], s[end:]
	if strings.ContainsRune(extra, '\n') {
		return Version{}, false // upstream's ".*" stops at a newline
	}
	parts := strings.Split(numbers, ".")
	if (semantic && len(parts) != 3) || (!semantic && len(parts) < 2) {
		return Version{}, false
	}
	v := Version{Components: make([]uint64, len(parts)), Semantic: semantic}
	for i, p := range parts {
		if (i == 0 || semantic) && len(p) > 1 && p[0] == '0' {
			return Version{}, false
		}
		n, ok := parseUint64(p)
		if !ok {
			return Version{}, false
		}
		v.Components[i] = n
	}
	if !semantic || extra == "" {
		return v, true
	}
	// -pre.release+build.metadata, trailing whitespace allowed.
	extra = strings.TrimRight(extra, space)
	if strings.HasPrefix(extra, "-") {
		pre, build, hasBuild := strings.Cut(extra[1:], "+")
		if !identifiers(pre) {
			return Version{}, false
		}
		v.PreRelease, extra = pre, ""
		if hasBuild {
			extra = "+" + build
		}
	}
	if strings.HasPrefix(extra, "+") {
		if !identifiers(extra[1:]) {
			return Version{}, false
		}
		v.BuildMetadata, extra = extra[1:], ""
	}
	if extra != "" {
		return Version{}, false
	}
	for _, p := range strings.Split(v.PreRelease, ".") {
		if _, num := parseUint64(p); num && len(p) > 1 && p[0] == '0' {
			return Version{}, false
		}
	}
	return v, true
}

// digits returns the index after the ASCII digits of s from i.
func digits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// identifiers reports whether s is dot-separated non-empty runs of
// [0-9A-Za-z-].
func identifiers(s string) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				return false
			}
		}
	}
	return true
}

// parseUint64 parses decimal digits that fit 64 bits.
func parseUint64(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// Compare returns -1, 0 or 1 as v is older than, the same as or newer than
// o, as Kubernetes compares versions: number by number (missing numbers
// are 0), then, when both are semantic, a release after its pre-releases
// and pre-release identifiers numerically or by ASCII; build metadata
// never counts.
func (v Version) Compare(o Version) int {
	n := min(len(v.Components), len(o.Components))
	for i := 0; i < n; i++ {
		switch {
		case v.Components[i] > o.Components[i]:
			return 1
		case v.Components[i] < o.Components[i]:
			return -1
		}
	}
	if !zeros(v.Components[n:]) {
		return 1
	}
	if !zeros(o.Components[n:]) {
		return -1
	}
	if !v.Semantic || !o.Semantic {
		return 0
	}
	switch {
	case v.PreRelease == o.PreRelease:
		return 0
	case v.PreRelease == "":
		return 1
	case o.PreRelease == "":
		return -1
	}
	a, b := strings.Split(v.PreRelease, "."), strings.Split(o.PreRelease, ".")
	for i := 0; i < len(a) && i < len(b); i++ {
		x, xNum := parseUint64(a[i])
		y, yNum := parseUint64(b[i])
		if xNum && yNum {
			switch {
			case x > y:
				return 1
			case x < y:
				return -1
			}
			continue
		}
		switch {
		case a[i] > b[i]:
			return 1
		case a[i] < b[i]:
			return -1
		}
	}
	switch {
	case len(a) > len(b):
		return 1
	case len(a) < len(b):
		return -1
	}
	return 0
}

// AtLeast reports whether v is o or newer: a version floor.
func (v Version) AtLeast(o Version) bool { return v.Compare(o) >= 0 }

// Release is v without its pre-release and build metadata: 1.36.10 for
// "v1.36.10-eks-113cf36", for floors that a vendor's suffix must not fail.
func (v Version) Release() Version {
	return Version{Components: v.Components, Semantic: v.Semantic}
}

func zeros(c []uint64) bool {
	for _, n := range c {
		if n != 0 {
			return false
		}
	}
	return true
}
