package host

import (
	"fmt"

	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
)

// badTerm logs, once per policy, a count_pods term that does not parse,
// with the parser's reason: the guest only sees -2.
func (p *Policy) badTerm(term []byte) {
	if _, logged := p.undeclared.LoadOrStore("count_pods term", true); logged {
		return
	}
	_, err := ParseCountTerm(term)
	klog.InfoS("Policy passed count_pods a term that does not parse; the call returned BadArgs (-2)", "policy", p.name, "err", err,
		"fix", "pass a PodAffinityTerm in JSON (labelSelector, namespaces, namespaceSelector, topologyKey, includeTerminating), as docs/abi.md §4.6.1 shows")
}

// refused logs, once per policy and function, a read refused to a
// namespaced policy: the guest got NotFound.
func (p *Policy) refused(fn, why string) {
	if _, logged := p.undeclared.LoadOrStore("refused "+fn, true); logged {
		return
	}
	klog.InfoS("Namespaced policy made a read outside its namespace; the read answered as if there were nothing", "policy", p.name, "read", fn, "why", why)
}

// permits reports whether the policy declared scope, and logs the first
// undeclared read of each scope: the guest gets abi.NotDeclared, the
// operator a line that names the read and the declaration it needs.
func (p *Policy) permits(scope fields.Scope, fn string, num int32) bool {
	if scope == fields.ScopeNone || p.reads[scope] {
		return true
	}
	if _, logged := p.undeclared.LoadOrStore(scope, true); !logged {
		read := fn
		if num != fields.NoNum {
			read = fmt.Sprintf("%s(%d)", fn, num)
		}
		klog.InfoS("Policy read data its args do not declare; the read returned NotDeclared (-4)",
			"policy", p.name, "read", read, "fix", fields.Undeclared(fn, num))
	}
	return false
}
