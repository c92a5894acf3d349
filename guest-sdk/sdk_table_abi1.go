//go:build wasip1 && wasmsched_abi1

package sdk

// The SDK as it was before node tables (ABI v1), selected with
// -tags wasmsched_abi1: every node read is a host call. It exists so that
// benchmarks and tests can run the same policy source as a v1 and a v2
// guest in one run; a policy has no reason to use it.

const sdkABIVersion = 1

var (
	inTable, inBatch bool
	rowError         string
)

func batchStart()                                    {}
func tableStart(int32) bool                          { return false }
func tableSelect(int32)                              {}
func tableEnd()                                      {}
func reportRow(Status, int64)                        {}
func selectForHost()                                 {}
func tableKeyed(string, string) (string, bool, bool) { return "", false, false }
func tableKeyedFast(string, string) (string, bool, bool) {
	return "", false, false
}
func tableInt(string, string) (int64, bool)         { return 0, false }
func col(string, string) int                        { return -1 }
func tableResource(int32, string) (int64, bool)     { return 0, false }
func tableResourceSlow(int32, string) (int64, bool) { return 0, false }
func colU64(int) uint64                             { return 0 }
