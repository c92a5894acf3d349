// Package sdkhelpers holds the SDK's parsing helpers to the upstream code
// they mirror: sdk.ParseVersion to k8s.io/apimachinery's version.Parse,
// sdk.NormalizeImage to the kubelet's image-name parsing
// (github.com/distribution/reference through pkg/util/parsers), on
// hand-picked and generated strings.
package sdkhelpers

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/kubernetes/pkg/util/parsers"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

var versions = []string{
	"v1.37.2", "1.37.2", "v1.30.0-eks-1", "v1.29.3+k3s1", "v1.28.4-gke.1000", "6.8.0-1019-aws", "5.15.0", "1.7.22",
	"1.2", "1.2.3.4", "1.2.3.4-x", "v1.2.3-rc.1", "v1.2.3-rc.2", "v1.2.3-rc.10", "v1.2.3-alpha", "v1.2.3-alpha.1",
	"v1.2.3-0.1", "v1.2.3-01", "v1.2.3+build.5", "v1.2.3-rc.1+b", " v1.2.3", "1.2.3 ", "1.2.3\n", "\t1.2", "1.02.3",
	"01.2.3", "1.2.03", "1", "v", "", "x1.2", "V1.2.3", "vv1.2", "1.2.3-", "1.2.3+", "1.2.3-a..b", "1.2.3-a_b",
	"1.2.3 -rc", "1.2.", "1..2", "18446744073709551615.0.0", "18446744073709551616.0.0", "1.0.0", "1.0", "1.0.0.0",
	"1.2.3-rc.1 ", "1.2.3-RC.1", "1.2.3-rc.01", "1.2.3-1", "1.2.3-1.2", "1.2.3-1.a", "1.2.3-a.1", "2.0.0", "1.10.0",
}

// withRandom is picked followed by 20,000 strings of up to maxLen bytes from
// alphabet, the same for a seed.
func withRandom(picked []string, seed uint64, alphabet string, maxLen int) []string {
	r := rand.New(rand.NewPCG(seed, 2026))
	in := slices.Clone(picked)
	for range 20000 {
		b := make([]byte, 1+r.IntN(maxLen))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		in = append(in, string(b))
	}
	return in
}

func TestParseVersionMatchesApimachinery(t *testing.T) {
	in := withRandom(versions, 2026, "0123456789..-+vraeks \n", 12)
	var parsed []sdk.Version
	var upstream []*version.Version
	for _, s := range in {
		got, ok := sdk.ParseVersion(s)
		want, err := version.Parse(s)
		if ok != (err == nil) {
			t.Fatalf("%q: sdk ok=%v, version.Parse error %v", s, ok, err)
		}
		if !ok {
			continue
		}
		comps := make([]uint64, len(want.Components()))
		for i, c := range want.Components() {
			comps[i] = uint64(c)
		}
		if !slices.Equal(got.Components, comps) || got.PreRelease != want.PreRelease() || got.BuildMetadata != want.BuildMetadata() {
			t.Fatalf("%q: sdk %+v, version.Parse %v (pre %q, build %q)", s, got, want.Components(), want.PreRelease(), want.BuildMetadata())
		}
		parsed, upstream = append(parsed, got), append(upstream, want)
	}
	if len(parsed) < 500 {
		t.Fatalf("only %d of %d strings parse: the generator is off", len(parsed), len(in))
	}
	// Every ordered pair of the first 1500 (the hand-picked ones first).
	parsed, upstream = parsed[:min(len(parsed), 1500)], upstream[:min(len(upstream), 1500)]
	for i := range parsed {
		for j := range parsed {
			want := 0
			switch {
			case upstream[i].LessThan(upstream[j]):
				want = -1
			case upstream[i].GreaterThan(upstream[j]):
				want = 1
			}
			if got := parsed[i].Compare(parsed[j]); got != want {
				t.Fatalf("%v vs %v: sdk %d, apimachinery %d", upstream[i], upstream[j], got, want)
			}
			if parsed[i].AtLeast(parsed[j]) != upstream[i].AtLeast(upstream[j]) {
				t.Fatalf("%v at least %v: sdk %v", upstream[i], upstream[j], parsed[i].AtLeast(parsed[j]))
			}
		}
	}
	t.Logf("%d strings, %d versions, %d ordered pairs agree", len(in), len(parsed), len(parsed)*len(parsed))
}

var images = []string{
	"nginx", "nginx:1.25", "library/nginx", "docker.io/nginx", "docker.io/library/nginx:1.25", "index.docker.io/nginx",
	"org/app", "org/app:v2", "org/sub/app:v2", "ghcr.io/org/app", "ghcr.io/org/app:1.0", "localhost/app", "localhost:5000/app",
	"localhost:5000", "registry.example.com:443/team/app:v1", "[::1]:5000/app", "[fe80::1]/app:x", "Foo/bar", "foo/Bar",
	"NGINX", "nginx:Latest", "nginx:-x", "nginx:_x", "nginx:" + string(make([]byte, 0)), "a.b", "a..b", "a__b", "a___b",
	"a--b", "a-.b", "a_b.c-d", "-a", "a-", "app@sha256:" + hex(64), "app:v1@sha256:" + hex(64), "app@sha256:" + hex(63),
	"app@sha512:" + hex(128), "app@sha384:" + hex(96), "app@md5:" + hex(32), "app@SHA256:" + hex(64), "app@sha256:" + upper(hex(64)),
	hex(64), "sha256:" + hex(64), "", "/", "a/", "/a", "a//b", "example.com/", "example.com:/a", "example.com:x/a",
	"-example.com/a", "example-.com/a", "exa_mple.com/a", "127.0.0.1:5000/a", "a:b:c", "a@b@c", "a b", "a/b:tag with space",
}

func hex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = "0123456789abcdef"[i%16]
	}
	return string(b)
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'f' {
			b[i] = c - 32
		}
	}
	return string(b)
}

func TestNormalizeImageMatchesTheKubelet(t *testing.T) {
	in := withRandom(images, 11, "abcxyzAB019.-_:/@[]", 16)
	ok := 0
	for _, s := range in {
		got, gotOK := sdk.NormalizeImage(s)
		repo, tag, digest, err := parsers.ParseImageName(s)
		want := repo
		if tag != "" {
			want += ":" + tag
		}
		if digest != "" {
			want += "@" + digest
		}
		if gotOK != (err == nil) || (err == nil && got != want) {
			t.Fatalf("%q: sdk %q ok=%v; kubelet %q, error %v", s, got, gotOK, want, err)
		}
		if gotOK {
			ok++
		}
	}
	if ok < 1000 {
		t.Fatalf("only %d of %d references parse: the generator is off", ok, len(in))
	}
	t.Logf("%d references, %d valid, all normalized as the kubelet does", len(in), ok)
}

func Example() {
	v, _ := sdk.ParseVersion("v1.30.0-eks-1")
	floor, _ := sdk.ParseVersion("v1.29.0")
	img, _ := sdk.NormalizeImage("nginx")
	fmt.Println(v.AtLeast(floor), img)
	// Output: true docker.io/library/nginx:latest
}
