// Package casetest runs table-driven cases against a policy's registered
// functions natively (plain `go test`, no wasm). The same case files are
// replayed against the compiled module through the real host by the main
// module's tests, so native logic and wasm behaviour are held to one table.
package casetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	sdk "github.com/wasmsched/wasmsched/guest-sdk"
)

// File is a policy's case table: the config the policy runs with and its cases.
type File struct {
	Config string `json:"config"`
	// Reads are the policy's declared reads (policies[].reads), for the
	// compiled module; natively every read answers.
	Reads []string `json:"reads,omitempty"`
	Cases []Case   `json:"cases"`
}

// Case is one pod on one node with the expected verdicts. Nil expectations are not checked.
type Case struct {
	Name   string       `json:"name"`
	Pod    sdk.PodData  `json:"pod"`
	Node   sdk.NodeData `json:"node"`
	Filter *Expect      `json:"filter,omitempty"`
	Score  *int64       `json:"score,omitempty"`
	// Cluster is what sdk.Cluster sees in the case: its nodes (with their
	// pods) and namespaces. Without it the cluster is the case's node
	// alone, with no namespaces.
	Cluster *Cluster `json:"cluster,omitempty"`
}

// Cluster is a case's cluster view (docs/abi.md §4.6).
type Cluster struct {
	Nodes      []sdk.NodeData               `json:"nodes"`
	Namespaces map[string]map[string]string `json:"namespaces,omitempty"`
}

// ClusterData is the case's cluster for the native backend.
func (c *Case) ClusterData() *sdk.ClusterData {
	if c.Cluster == nil {
		return &sdk.ClusterData{Nodes: []*sdk.NodeData{&c.Node}}
	}
	out := &sdk.ClusterData{Namespaces: c.Cluster.Namespaces}
	for i := range c.Cluster.Nodes {
		out.Nodes = append(out.Nodes, &c.Cluster.Nodes[i])
	}
	return out
}

// Expect is an expected status.
type Expect struct {
	Code   int32  `json:"code"`
	Reason string `json:"reason,omitempty"`
}

// Load reads a case file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Unknown fields are errors: a misspelt "Allocatble" would otherwise
	// run the case on a node without allocatable resources.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	f := &File{}
	if err := dec.Decode(f); err != nil {
		return nil, fmt.Errorf("%s: %w (the fields are those of docs/abi.md §8)", path, err)
	}
	return f, nil
}
