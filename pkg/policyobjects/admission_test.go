package policyobjects

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	configv1 "github.com/wasmsched/wasmsched/pkg/apis/config/v1"
)

// Each namespace is bound to exactly one of the policies: the entry naming
// it, or the default; and each policy carries its entry's values. A
// selector narrows every binding. (test/e2e's teams test applies them to
// a real apiserver, which refuses with the scheduler's messages.)
func TestAdmissionPoliciesBindEachNamespaceOnce(t *testing.T) {
	args := &configv1.WasmPolicyArgs{PolicyObjects: configv1.PolicyObjects{Enabled: true, Tenants: configv1.Tenants{
		Namespaces: []configv1.NamespaceTenantLimits{
			{Names: []string{"team-a", "team-b"}, TenantLimits: configv1.TenantLimits{Reads: []string{"NodePods"}, MaxTimeout: dur(200 * time.Millisecond), MaxCycleBudget: dur(time.Second)}},
			{Names: []string{"team-c"}, TenantLimits: configv1.TenantLimits{AllowRealClock: ptr.To(true), PatchPrefixes: []string{"team.example.com/"}}},
		},
	}}}
	configv1.SetObjectDefaults_WasmPolicyArgs(args)
	var out config.WasmPolicyArgs
	if err := configv1.Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(args, &out, nil); err != nil {
		t.Fatal(err)
	}
	team, _ := metav1.ParseToLabelSelector("team")
	for _, tc := range []struct {
		name     string
		selector *metav1.LabelSelector
		// namespace -> labels, and the policy bound to it ("": none)
		namespaces map[string]labels.Set
		want       map[string]string
	}{
		{
			name:       "every namespace",
			namespaces: map[string]labels.Set{"team-a": {}, "team-b": {}, "team-c": {}, "team-d": {}, "kube-system": {}},
			want:       map[string]string{"team-a": "t-namespaces-0", "team-b": "t-namespaces-0", "team-c": "t-namespaces-1", "team-d": "t-default", "kube-system": "t-default"},
		},
		{
			name:       "narrowed to labelled namespaces",
			selector:   team,
			namespaces: map[string]labels.Set{"team-a": {"team": "a"}, "team-c": {}, "team-d": {"team": "d"}, "kube-system": {}},
			want:       map[string]string{"team-a": "t-namespaces-0", "team-c": "", "team-d": "t-default", "kube-system": ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := AdmissionPolicies(&out.PolicyObjects.Tenants, "t", tc.selector)
			policies := map[string]*admissionv1.ValidatingAdmissionPolicy{}
			got := map[string]string{}
			for ns := range tc.namespaces {
				got[ns] = ""
			}
			for _, o := range objs {
				switch o := o.(type) {
				case *admissionv1.ValidatingAdmissionPolicy:
					policies[o.Name] = o
				case *admissionv1.ValidatingAdmissionPolicyBinding:
					if policies[o.Spec.PolicyName] == nil {
						t.Errorf("binding %s comes before its policy %s", o.Name, o.Spec.PolicyName)
					}
					sel, err := metav1.LabelSelectorAsSelector(o.Spec.MatchResources.NamespaceSelector)
					if err != nil {
						t.Fatal(err)
					}
					for ns, l := range tc.namespaces {
						set := labels.Merge(l, labels.Set{"kubernetes.io/metadata.name": ns})
						if !sel.Matches(set) {
							continue
						}
						if got[ns] != "" {
							t.Errorf("namespace %s is bound to both %s and %s", ns, got[ns], o.Spec.PolicyName)
						}
						got[ns] = o.Spec.PolicyName
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("policy bound to each namespace (-want +got):\n%s", diff)
			}
			exprs := func(name string) string {
				var b strings.Builder
				for _, v := range policies[name].Spec.Validations {
					b.WriteString(v.Expression + "\n" + v.MessageExpression + "\n")
				}
				return b.String()
			}
			for name, wants := range map[string][]string{
				"t-namespaces-0": {`duration(object.spec.timeout) <= duration("200ms")`, `duration("1s")`, `x in ["NodePods"]`, "policyObjects.tenants.namespaces[0].maxTimeout", "!object.spec.realClock"},
				"t-namespaces-1": {`duration("50ms")`, `["team.example.com/"].exists(g, x.startsWith(g))`, "policyObjects.tenants.namespaces[1].patchPrefixes"},
				"t-default":      {`duration("50ms")`, `quantity("16Mi")`, "object.spec.weight <= 1", "policyObjects.tenants.default.reads", "!object.spec.realClock"},
			} {
				for _, w := range wants {
					if !strings.Contains(exprs(name), w) {
						t.Errorf("%s lacks %s:\n%s", name, w, exprs(name))
					}
				}
			}
			if strings.Contains(exprs("t-namespaces-1"), "realClock") {
				t.Errorf("t-namespaces-1 refuses the real clock it grants:\n%s", exprs("t-namespaces-1"))
			}
		})
	}
}
