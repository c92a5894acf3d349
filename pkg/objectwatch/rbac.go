package objectwatch

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// RBAC returns the objects that let the scheduler's ServiceAccount
// (namespace/serviceAccount) get, list and watch the kinds grants name: a
// Role and RoleBinding in each namespace a grant lists, a ClusterRole and
// ClusterRoleBinding for a grant of every namespace. Their names start
// with prefix, as the chart's do (<prefix>-read-<resource>.<group>).
func RBAC(grants []config.ObjectGrant, prefix, namespace, serviceAccount string) []any {
	var out []any
	for _, g := range grants {
		gv, err := schema.ParseGroupVersion(g.APIVersion)
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(prefix+"-read-"+g.Resource+"."+gv.Group, ".")
		rules := []rbacv1.PolicyRule{{APIGroups: []string{gv.Group}, Resources: []string{g.Resource}, Verbs: []string{"get", "list", "watch"}}}
		subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: namespace}}
		if len(g.Namespaces) == 0 {
			out = append(out,
				&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
				&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: metav1.ObjectMeta{Name: name},
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subjects})
			continue
		}
		for _, ns := range g.Namespaces {
			out = append(out,
				&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules},
				&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subjects})
		}
	}
	return out
}
