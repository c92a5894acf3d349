// Package model is the data model of everything a policy can read (a pod,
// a node, the cluster; docs/abi.md §4.0) and its one wire encoding. Every
// producer of what a guest reads goes through it: the host converts a
// v1.Pod and a NodeInfo into these types (internal/kubemodel) and encodes
// them with the functions of encode.go, the SDK's native backend encodes
// a test's values with the same functions, and case tables are these
// types in JSON. So a read cannot mean one thing in the scheduler and
// another in a unit test: kubemodel's round-trip test converts generated
// values to Kubernetes objects and back for every row of the fields table.
//
// It depends on nothing but package abi, so guests link it: the SDK's
// PodData, NodeData and the types they hold are aliases of these.
package model
