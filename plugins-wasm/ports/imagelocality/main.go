// Command imagelocality is kube-scheduler's ImageLocality plugin as a
// wasmsched policy. It favours nodes that already hold the pod's images: each
// image of an init container, a container or an image volume that the node
// holds adds its size scaled by the share of the cluster's nodes that hold
// it (so an image on every node adds its full size, one on a tenth of the
// nodes a tenth: upstream's guard against piling pods onto the few nodes
// that pulled an image first). The sum, clamped between 23 MiB and
// 1000 MiB per image, maps linearly onto 0..100. No NormalizeScore.
//
// It reads the node's image states and the number of nodes, so its policy
// declares `reads: [Cluster]`. A node that holds none of the pod's images
// scores 0 from its image-size columns alone, without those reads.
package main

import (
	"strings"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

func init() {
	sdk.RegisterScore(score)
}

const (
	mb                    int64 = 1024 * 1024
	minThreshold                = 23 * mb
	maxContainerThreshold       = 1000 * mb
	maxNodeScore          int64 = 100
)

// images are the pod's normalized image names, init containers first,
// then containers, then image volumes (upstream's order), once per cycle.
var images sdk.PerCycle[[]string]

func podImages(pod sdk.Pod) []string {
	return images.Get(func() []string {
		var out []string
		cs := pod.Containers()
		for _, kind := range []string{sdk.ContainerInit, sdk.ContainerApp} {
			for _, c := range cs {
				if c.Kind == kind {
					out = append(out, normalizedImageName(c.Image))
				}
			}
		}
		for _, ref := range pod.ImageVolumes() {
			out = append(out, normalizedImageName(ref))
		}
		return out
	})
}

func score(pod sdk.Pod, node sdk.Node) (int64, sdk.Status) {
	names := podImages(pod)
	if len(names) > 0 && !holdsAny(node, names) {
		return 0, sdk.Success() // what the sum below gives without a held image
	}
	states := node.ImageStates()
	total := sdk.Cluster{}.NodeCount()
	var sum int64
	for _, name := range names {
		for _, st := range states {
			if st.Name == name {
				spread := float64(st.NumNodes) / float64(total)
				sum += int64(float64(st.SizeBytes) * spread)
				break
			}
		}
	}
	maxThreshold := maxContainerThreshold * int64(len(names))
	if sum < minThreshold {
		sum = minThreshold
	} else if sum > maxThreshold {
		sum = maxThreshold
	}
	return maxNodeScore * (sum - minThreshold) / (maxThreshold - minThreshold), sdk.Success()
}

// holdsAny reports whether the node lists one of the images: in a batch
// that is a node-table column per image, so a node without them costs no
// host call and no read of the cluster, and its score is its row's. An
// image listed with size 0 counts as held: the scheduler's image states
// may still give it the size another node reported.
func holdsAny(node sdk.Node, names []string) bool {
	for _, name := range names {
		if node.ImageSize(name) >= 0 {
			return true
		}
	}
	return false
}

// normalizedImageName adds the implicit ":latest" tag, as the container
// runtime reports the image: a name whose last ':' does not come after its
// last '/' has no tag. (Upstream does no other normalization, so
// "nginx" in a pod and "docker.io/library/nginx:latest" on a node do not
// match.)
func normalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		name += ":latest"
	}
	return name
}

func main() {}
