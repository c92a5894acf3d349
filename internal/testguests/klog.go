package testguests

import (
	"flag"
	"testing"

	"k8s.io/klog/v2"
)

// CaptureKlog sends klog's output to a buffer for the rest of the test, so
// that a test can count what a policy made the scheduler log.
func CaptureKlog(t testing.TB) *LogBuffer {
	t.Helper()
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	buf := &LogBuffer{}
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(nil)
	})
	return buf
}
