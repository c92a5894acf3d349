// Command image-warmth is a Score policy: it prefers nodes that already hold
// the pod's container images (init, sidecar and app containers). Image
// references are compared normalized (sdk.NormalizeImage), so "nginx" on the
// pod matches "docker.io/library/nginx:latest" on the node.
//
// Score: 100 × (the pod's distinct images the node holds) / (the pod's
// distinct images). A pod with no valid image reference scores 0 everywhere.
// No config, no reads (status.images needs no declaration).
package main

import sdk "github.com/wasmsched/wasmsched/guest-sdk"

func init() { sdk.RegisterScore(score) }

var wanted sdk.PerCycle[[]string]

func podImages(pod sdk.Pod) []string {
	return wanted.Get(func() []string {
		var out []string
		for _, c := range pod.Containers() {
			n, ok := sdk.NormalizeImage(c.Image)
			if !ok {
				continue
			}
			dup := false
			for _, o := range out {
				if o == n {
					dup = true
					break
				}
			}
			if !dup {
				out = append(out, n)
			}
		}
		return out
	})
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	want := podImages(pod)
	if len(want) == 0 {
		return 0, sdk.Success()
	}
	have := node.Images()
	var hit int64
	for _, w := range want {
		for _, img := range have {
			n, ok := sdk.NormalizeImage(img.Name)
			if ok && sdk.Equal(n, w) {
				hit++
				break
			}
		}
	}
	return 100 * hit / int64(len(want)), sdk.Success()
}

func main() {}
