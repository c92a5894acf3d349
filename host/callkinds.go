package host

import "github.com/wasmsched/wasmsched/guest-sdk/abi"

// CallKind is an ABI extension point (abi.Point): the host's call kinds are
// the rows of abi.Points.
type CallKind = abi.Point

// The extension points the plugin calls with Version.Call; the batch forms
// (abi.FilterNodes, abi.ScoreNodes) are called through Version.CallNodes.
const (
	CallPreFilter      = abi.PreFilter
	CallFilter         = abi.Filter
	CallPreScore       = abi.PreScore
	CallScore          = abi.Score
	CallNormalizeScore = abi.NormalizeScore
	// The batch forms of Filter and Score (Version.CallNodes picks them).
	CallFilterNodes = abi.FilterNodes
	CallScoreNodes  = abi.ScoreNodes
	// PreEnqueue and PreBind (ABI v3), outside the scheduling cycle.
	CallPreEnqueue = abi.PreEnqueue
	CallPreBind    = abi.PreBind
	// PostFilter and PostBind (ABI v4), after the cycle's outcome.
	CallPostFilter = abi.PostFilter
	CallPostBind   = abi.PostBind
	// Reserve and Unreserve (ABI v4), around a placement.
	CallReserve   = abi.Reserve
	CallUnreserve = abi.Unreserve
	// Permit (ABI v4): allow, reject or wait.
	CallPermit = abi.Permit
	// NumCallKinds sizes arrays indexed by CallKind.
	NumCallKinds = abi.NumPoints
)
