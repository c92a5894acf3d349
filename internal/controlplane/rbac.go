package controlplane

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// GrantPolicyRead lets user get, list and watch the ConfigMaps of namespace,
// which is what the WasmPolicy ConfigMap source needs and what kube-scheduler's
// bootstrap role does not grant.
func GrantPolicyRead(ctx context.Context, c kubernetes.Interface, namespace, user string) error {
	return grantRole(ctx, c, namespace, "wasmsched-policy-reader", user,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
}

// grantRole creates a Role named name in namespace with rules, and binds it
// to user.
func grantRole(ctx context.Context, c kubernetes.Interface, namespace, name, user string, rules ...rbacv1.PolicyRule) error {
	if _, err := c.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := c.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{})
	return err
}

// InstallPolicyObjects installs the policy.wasmsched.io CRDs from
// manifests/crds and lets user (the scheduler's identity) do with them what
// manifests/base lets the wasmsched ServiceAccount do: the ClusterRole of
// manifests/base/rbac-policy-objects.yaml, bound to user, and get/update of
// status Leases in leaseNamespace. It applies the manifests with kubectl, as
// an operator would, and waits until the CRDs are established.
func InstallPolicyObjects(ctx context.Context, c kubernetes.Interface, root, kubectl, kubeconfig, user, leaseNamespace string) error {
	for _, args := range [][]string{
		{"apply", "--server-side", "-k", filepath.Join(root, "manifests", "crds")},
		{"apply", "--server-side", "-f", filepath.Join(root, "manifests", "base", "rbac-policy-objects.yaml")},
		{"wait", "--for=condition=Established", "--timeout=60s", "crd/clusterschedulingpolicies.policy.wasmsched.io", "crd/schedulingpolicies.policy.wasmsched.io"},
	} {
		if out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "wasmsched-policy-objects-" + strings.ReplaceAll(user, ":", "-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wasmsched-policy-objects"},
		Subjects:   subject,
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	const leases = "wasmsched-status-leases"
	if _, err := c.RbacV1().Roles(leaseNamespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: leases},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := c.RbacV1().RoleBindings(leaseNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: leases},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leases},
		Subjects:   subject,
	}, metav1.CreateOptions{})
	return err
}

// GrantModuleRead lets user read the module ConfigMaps of namespace, as a
// namespace shipping policies does for the scheduler (manifests/examples/team):
// a RoleBinding to the ClusterRole wasmsched-policy-module-reader.
func GrantModuleRead(ctx context.Context, c kubernetes.Interface, namespace, user string) error {
	_, err := c.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "wasmsched-policy-module-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wasmsched-policy-module-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{})
	return err
}

// GrantPodPatch lets user patch pods, for the policies' PreBind patches:
// what the ClusterRole wasmsched-pod-patcher of manifests/base/rbac.yaml
// grants the scheduler's ServiceAccount (kube-scheduler's bootstrap role
// binds pods and updates their status, but cannot patch them).
func GrantPodPatch(ctx context.Context, c kubernetes.Interface, user string) error {
	name := "wasmsched-pod-patcher-" + strings.ReplaceAll(user, ":", "-")
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{})
	return err
}

// GrantSecretRead lets user get the named Secrets of namespace (an oci
// source's pullSecret), as the Role in manifests/examples/oci does for the
// scheduler's ServiceAccount: get on those Secrets by name, nothing else.
func GrantSecretRead(ctx context.Context, c kubernetes.Interface, namespace, user string, names ...string) error {
	return grantRole(ctx, c, namespace, "wasmsched-pull-secret-reader", user,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: names})
}
