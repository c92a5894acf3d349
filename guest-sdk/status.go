package sdk

import (
	"time"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
)

// Code is a status code; the values are the kube-scheduler framework's.
type Code int32

// Status codes a policy can return.
const (
	CodeSuccess                      Code = Code(abi.CodeSuccess)
	CodeError                        Code = Code(abi.CodeError)
	CodeUnschedulable                Code = Code(abi.CodeUnschedulable)
	CodeUnschedulableAndUnresolvable Code = Code(abi.CodeUnschedulableAndUnresolvable)
	CodeSkip                         Code = Code(abi.CodeSkip)
	// CodeWait, from a Permit function only (Wait), makes the pod wait.
	CodeWait Code = Code(abi.CodeWait)
)

// Status is a policy's verdict for one call.
type Status struct {
	Code   Code
	Reason string
	// Timeout is how long a Wait lasts at most (Permit).
	Timeout time.Duration
}

// Success lets the pod onto the node (Filter) or accepts the score (Score).
func Success() Status { return Status{} }

// Unschedulable rejects the node; the reason appears in the pod's
// FailedScheduling event as "N node(s) rejected by WasmPolicy/<policy>: <reason>".
// Preemption may still try the node.
func Unschedulable(reason string) Status { return Status{Code: CodeUnschedulable, Reason: reason} }

// UnschedulableAndUnresolvable rejects the node and tells the scheduler that
// preempting pods on it would not help.
func UnschedulableAndUnresolvable(reason string) Status {
	return Status{Code: CodeUnschedulableAndUnresolvable, Reason: reason}
}

// Error reports that the policy could not decide; the policy's failurePolicy
// decides what the scheduler does.
func Error(reason string) Status { return Status{Code: CodeError, Reason: reason} }

// Skip, returned from PreFilter or PreScore, skips this policy's Filter or
// Score for the whole cycle.
func Skip() Status { return Status{Code: CodeSkip} }

// IsSuccess reports whether the status is Success.
func (s Status) IsSuccess() bool { return s.Code == CodeSuccess }
