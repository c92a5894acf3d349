package v1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// The conversions conversion-gen cannot write (zz_generated.conversion.go
// names the fields): the versioned form uses pointers, metav1.Duration and
// resource.Quantity so that unset fields can be defaulted; the internal form
// uses plain values. An unset pointer (only possible when defaulting was
// skipped) becomes the zero value, which validation rejects.

// Convert_v1_PolicySettings_To_config_PolicySettings converts one versioned
// policy's settings (the args' or a policy object's).
func Convert_v1_PolicySettings_To_config_PolicySettings(in *PolicySettings, out *config.PolicySettings, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_v1_PolicySettings_To_config_PolicySettings(in, out, s); err != nil {
		return err
	}
	out.Timeout = durationValue(in.Timeout)
	out.PreEnqueueTimeout = durationValue(in.PreEnqueueTimeout)
	out.MaxPermitWait = durationValue(in.MaxPermitWait)
	out.CycleBudget = durationValue(in.CycleBudget)
	out.MemoryLimit = 0
	if in.MemoryLimit != nil {
		out.MemoryLimit = in.MemoryLimit.Value()
	}
	out.StackLimit = quantityValue(in.StackLimit)
	out.FailurePolicy = config.FailurePolicy(stringValue(in.FailurePolicy))
	out.Mode = config.Mode(stringValue(in.Mode))
	out.VerdictReuse = config.VerdictReuse(stringValue(in.VerdictReuse))
	return nil
}

// Convert_config_PolicySettings_To_v1_PolicySettings converts one internal
// policy's settings back.
func Convert_config_PolicySettings_To_v1_PolicySettings(in *config.PolicySettings, out *PolicySettings, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_config_PolicySettings_To_v1_PolicySettings(in, out, s); err != nil {
		return err
	}
	fp, mode := string(in.FailurePolicy), string(in.Mode)
	out.Timeout = &metav1.Duration{Duration: in.Timeout}
	out.PreEnqueueTimeout = &metav1.Duration{Duration: in.PreEnqueueTimeout}
	out.MaxPermitWait = &metav1.Duration{Duration: in.MaxPermitWait}
	out.CycleBudget = &metav1.Duration{Duration: in.CycleBudget}
	out.MemoryLimit = resource.NewQuantity(in.MemoryLimit, resource.BinarySI)
	out.StackLimit = resource.NewQuantity(in.StackLimit, resource.BinarySI)
	out.FailurePolicy, out.Mode = &fp, &mode
	if in.VerdictReuse != "" {
		reuse := string(in.VerdictReuse)
		out.VerdictReuse = &reuse
	}
	return nil
}

// Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs converts the args.
func Convert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(in *WasmPolicyArgs, out *config.WasmPolicyArgs, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_v1_WasmPolicyArgs_To_config_WasmPolicyArgs(in, out, s); err != nil {
		return err
	}
	out.FilePollInterval = durationValue(in.FilePollInterval)
	out.RetiredGrace = durationValue(in.RetiredGrace)
	out.MemoryBudget = 0
	if in.MemoryBudget != nil {
		out.MemoryBudget = in.MemoryBudget.Value()
	}
	return nil
}

// Convert_config_WasmPolicyArgs_To_v1_WasmPolicyArgs converts the args back.
func Convert_config_WasmPolicyArgs_To_v1_WasmPolicyArgs(in *config.WasmPolicyArgs, out *WasmPolicyArgs, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_config_WasmPolicyArgs_To_v1_WasmPolicyArgs(in, out, s); err != nil {
		return err
	}
	out.FilePollInterval = &metav1.Duration{Duration: in.FilePollInterval}
	out.RetiredGrace = &metav1.Duration{Duration: in.RetiredGrace}
	out.MemoryBudget = resource.NewQuantity(in.MemoryBudget, resource.BinarySI)
	return nil
}

// Convert_v1_OCISource_To_config_OCISource converts an oci source.
func Convert_v1_OCISource_To_config_OCISource(in *OCISource, out *config.OCISource, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_v1_OCISource_To_config_OCISource(in, out, s); err != nil {
		return err
	}
	out.PollInterval = durationValue(in.PollInterval)
	out.Timeout = durationValue(in.Timeout)
	out.MaxSize = 0
	if in.MaxSize != nil {
		out.MaxSize = in.MaxSize.Value()
	}
	return nil
}

// Convert_config_OCISource_To_v1_OCISource converts an oci source back.
func Convert_config_OCISource_To_v1_OCISource(in *config.OCISource, out *OCISource, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_config_OCISource_To_v1_OCISource(in, out, s); err != nil {
		return err
	}
	out.PollInterval = &metav1.Duration{Duration: in.PollInterval}
	out.Timeout = &metav1.Duration{Duration: in.Timeout}
	out.MaxSize = resource.NewQuantity(in.MaxSize, resource.BinarySI)
	return nil
}

// Convert_v1_CompileLimits_To_config_CompileLimits converts the compile limits.
func Convert_v1_CompileLimits_To_config_CompileLimits(in *CompileLimits, out *config.CompileLimits, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_v1_CompileLimits_To_config_CompileLimits(in, out, s); err != nil {
		return err
	}
	out.MaxCodeBytes = 0
	if in.MaxCodeBytes != nil {
		out.MaxCodeBytes = in.MaxCodeBytes.Value()
	}
	return nil
}

// Convert_config_CompileLimits_To_v1_CompileLimits converts them back.
func Convert_config_CompileLimits_To_v1_CompileLimits(in *config.CompileLimits, out *CompileLimits, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_config_CompileLimits_To_v1_CompileLimits(in, out, s); err != nil {
		return err
	}
	out.MaxCodeBytes = resource.NewQuantity(in.MaxCodeBytes, resource.BinarySI)
	return nil
}

// Convert_v1_CircuitBreaker_To_config_CircuitBreaker converts the breaker settings.
func Convert_v1_CircuitBreaker_To_config_CircuitBreaker(in *CircuitBreaker, out *config.CircuitBreaker, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_v1_CircuitBreaker_To_config_CircuitBreaker(in, out, s); err != nil {
		return err
	}
	out.Backoff = durationValue(in.Backoff)
	out.MaxBackoff = durationValue(in.MaxBackoff)
	return nil
}

// Convert_config_CircuitBreaker_To_v1_CircuitBreaker converts them back.
func Convert_config_CircuitBreaker_To_v1_CircuitBreaker(in *config.CircuitBreaker, out *CircuitBreaker, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_config_CircuitBreaker_To_v1_CircuitBreaker(in, out, s); err != nil {
		return err
	}
	out.Backoff = &metav1.Duration{Duration: in.Backoff}
	out.MaxBackoff = &metav1.Duration{Duration: in.MaxBackoff}
	return nil
}

func durationValue(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

func stringValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Convert_config_Scope_To_v1_Scope converts a scope back; Namespace (set for
// namespaced policy objects) has no place in the args and is dropped.
func Convert_config_Scope_To_v1_Scope(in *config.Scope, out *Scope, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	return autoConvert_config_Scope_To_v1_Scope(in, out, s)
}

// Convert_v1_TenantLimits_To_config_TenantLimits converts one namespace's
// limits.
func Convert_v1_TenantLimits_To_config_TenantLimits(in *TenantLimits, out *config.TenantLimits, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_v1_TenantLimits_To_config_TenantLimits(in, out, s); err != nil {
		return err
	}
	out.MaxTimeout = durationValue(in.MaxTimeout)
	out.MaxCycleBudget = durationValue(in.MaxCycleBudget)
	out.MaxPreEnqueueTimeout = durationValue(in.MaxPreEnqueueTimeout)
	out.MaxPermitWait = durationValue(in.MaxPermitWait)
	out.MaxMemoryLimit, out.MemoryBudget = quantityValue(in.MaxMemoryLimit), quantityValue(in.MemoryBudget)
	out.MaxStackLimit = quantityValue(in.MaxStackLimit)
	out.AllowRealClock, out.AllowRealRandom = boolValue(in.AllowRealClock), boolValue(in.AllowRealRandom)
	return nil
}

// Convert_config_TenantLimits_To_v1_TenantLimits converts them back.
func Convert_config_TenantLimits_To_v1_TenantLimits(in *config.TenantLimits, out *TenantLimits, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_config_TenantLimits_To_v1_TenantLimits(in, out, s); err != nil {
		return err
	}
	out.MaxTimeout = &metav1.Duration{Duration: in.MaxTimeout}
	out.MaxCycleBudget = &metav1.Duration{Duration: in.MaxCycleBudget}
	out.MaxPreEnqueueTimeout = &metav1.Duration{Duration: in.MaxPreEnqueueTimeout}
	out.MaxPermitWait = &metav1.Duration{Duration: in.MaxPermitWait}
	out.MaxMemoryLimit = resource.NewQuantity(in.MaxMemoryLimit, resource.BinarySI)
	out.MaxStackLimit = resource.NewQuantity(in.MaxStackLimit, resource.BinarySI)
	out.MemoryBudget = resource.NewQuantity(in.MemoryBudget, resource.BinarySI)
	clock, random := in.AllowRealClock, in.AllowRealRandom
	out.AllowRealClock, out.AllowRealRandom = &clock, &random
	return nil
}

// Convert_v1_Tenants_To_config_Tenants converts the tenants' limits.
func Convert_v1_Tenants_To_config_Tenants(in *Tenants, out *config.Tenants, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_v1_Tenants_To_config_Tenants(in, out, s); err != nil {
		return err
	}
	out.MemoryBudget = quantityValue(in.MemoryBudget)
	return nil
}

// Convert_config_Tenants_To_v1_Tenants converts them back.
func Convert_config_Tenants_To_v1_Tenants(in *config.Tenants, out *Tenants, s conversion.Scope) error { //nolint:revive // conversion-gen naming
	if err := autoConvert_config_Tenants_To_v1_Tenants(in, out, s); err != nil {
		return err
	}
	out.MemoryBudget = resource.NewQuantity(in.MemoryBudget, resource.BinarySI)
	return nil
}

func quantityValue(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.Value()
}

func boolValue(b *bool) bool { return b != nil && *b }
