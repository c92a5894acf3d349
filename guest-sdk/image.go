package sdk

import "strings"

// NormalizeImage returns a container image reference as the kubelet
// reports a node's images and as ImageLocality compares them: with its
// registry ("docker.io" when it names none), "library/" before an official
// image's name, and ":latest" when it has neither a tag nor a digest.
// "nginx" is "docker.io/library/nginx:latest", "org/app:v2" is
// "docker.io/org/app:v2", "ghcr.io/org/app@sha256:<64 hex>" stays as it is.
// It follows github.com/distribution/reference: ParseNormalizedNamed, then
// TagNameOnly; ok is false for a reference that ParseNormalizedNamed refuses
// (uppercase in the repository, a bad tag or digest, a bare 64-hex id).
func NormalizeImage(ref string) (string, bool) {
	if len(ref) == 64 && hexLower(ref) {
		return "", false // an image id, not a name
	}
	domain, rest := splitImageDomain(ref)
	remote := rest
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		remote = rest[:i]
	}
	if strings.ToLower(remote) != remote {
		return "", false
	}
	nameTag, digest, hasDigest := strings.Cut(rest, "@")
	name, tag, hasTag := strings.Cut(nameTag, ":")
	// The registry is optional in the grammar: "exa_mple.com/a" is no host
	// name, but a valid repository path of two components.
	path := name
	if !domainAndPort(domain) {
		path = domain + "/" + name
	}
	if !remoteName(path) || len(path) > 255 || (hasTag && !imageTag(tag)) || (hasDigest && !imageDigest(digest)) {
		return "", false
	}
	if !hasTag && !hasDigest {
		return domain + "/" + name + ":latest", true
	}
	return domain + "/" + rest, true
}

// splitImageDomain splits a reference into its registry and the rest, as
// distribution's splitDockerDomain: the first path element is the registry
// when it is localhost, has a dot or a colon, or has an uppercase letter.
func splitImageDomain(ref string) (domain, rest string) {
	first, after, ok := strings.Cut(ref, "/")
	switch {
	case !ok:
		return "docker.io", "library/" + ref
	case first == "localhost":
		domain, rest = first, after
	case first == "index.docker.io":
		domain, rest = "docker.io", after
	case strings.ContainsAny(first, ".:"), strings.ToLower(first) != first:
		domain, rest = first, after
	default:
		domain, rest = "docker.io", ref
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	return domain, rest
}

// domainAndPort matches a host name or a bracketed IPv6 address, with an
// optional port.
func domainAndPort(s string) bool {
	var port string
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 2 {
			return false
		}
		for i := 1; i < end; i++ {
			if c := s[i]; !(isHex(c) || c == ':') {
				return false
			}
		}
		port = s[end+1:]
	} else {
		host := s
		if i := strings.IndexByte(s, ':'); i >= 0 {
			host, port = s[:i], s[i:]
		}
		for _, c := range strings.Split(host, ".") {
			if !domainComponent(c) {
				return false
			}
		}
	}
	return port == "" || len(port) > 1 && port[0] == ':' && digitsOnly(port[1:])
}

// domainComponent matches [a-zA-Z0-9] or [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9].
func domainComponent(c string) bool {
	if c == "" || c[0] == '-' || c[len(c)-1] == '-' {
		return false
	}
	for i := 0; i < len(c); i++ {
		if x := c[i]; !(isAlnum(x) || x >= 'A' && x <= 'Z' || x == '-') {
			return false
		}
	}
	return true
}

// remoteName matches path components [a-z0-9]+ joined by ".", "_", "__"
// or runs of "-", separated by "/".
func remoteName(s string) bool {
	for _, p := range strings.Split(s, "/") {
		if p == "" || !isAlnum(p[0]) || !isAlnum(p[len(p)-1]) {
			return false
		}
		for i := 0; i < len(p); {
			if isAlnum(p[i]) {
				i++
				continue
			}
			j := i
			for j < len(p) && !isAlnum(p[j]) {
				j++
			}
			switch sep := p[i:j]; {
			case sep == "." || sep == "_" || sep == "__":
			case strings.Trim(sep, "-") == "":
			default:
				return false
			}
			i = j
		}
	}
	return true
}

// imageTag matches [\w][\w.-]{0,127}.
func imageTag(t string) bool {
	if t == "" || len(t) > 128 || !isWord(t[0]) {
		return false
	}
	for i := 1; i < len(t); i++ {
		if !isWord(t[i]) && t[i] != '.' && t[i] != '-' {
			return false
		}
	}
	return true
}

// imageDigest matches a digest go-digest accepts: sha256, sha384 or sha512
// and its lowercase hex of the right length.
func imageDigest(d string) bool {
	alg, enc, ok := strings.Cut(d, ":")
	if !ok {
		return false
	}
	size := map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}[alg]
	return size != 0 && len(enc) == size && hexLower(enc)
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
func isWord(c byte) bool  { return isAlnum(c) || c >= 'A' && c <= 'Z' || c == '_' }
func isHex(c byte) bool   { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func hexLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func digitsOnly(s string) bool { return s != "" && digits(s, 0) == len(s) }
