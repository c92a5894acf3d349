package hostabi

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// LogSafe keeps what klog writes of guest bytes within the limit: quotes
// and backslashes count twice, and what klog would escape longer becomes
// U+FFFD.
func TestLogSafe(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		limit     int
		want      string
		written   int
		cut       bool
		quotedMax int // strconv.Quote of the result, less its two quotes
	}{
		{name: "plain", in: "hello", limit: 10, want: "hello", written: 5},
		{name: "cut plain", in: "hello world", limit: 5, want: "hello", written: 5, cut: true},
		{name: "NUL bytes", in: strings.Repeat("\x00", 8), limit: 12, want: strings.Repeat("\uFFFD", 4), written: 12, cut: true},
		{name: "quotes", in: `"a"\`, limit: 100, want: `"a"\`, written: 7},
		{name: "quotes cut", in: strings.Repeat(`"`, 10), limit: 9, want: strings.Repeat(`"`, 4), written: 8, cut: true},
		{name: "invalid UTF-8", in: "a\xffb", limit: 10, want: "a\uFFFDb", written: 5},
		{name: "printable unicode", in: "zoné", limit: 10, want: "zoné", written: 5},
		{name: "tab and carriage return", in: "a\tb\rc", limit: 20, want: "a\uFFFDb\uFFFDc", written: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, written, cut := LogSafe([]byte(tc.in), tc.limit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
			if written != tc.written || cut != tc.cut {
				t.Errorf("written %d, cut %v; want %d, %v", written, cut, tc.written, tc.cut)
			}
			if q := len(strconv.Quote(got)) - 2; q > tc.limit {
				t.Errorf("quoted, the text takes %d bytes, over the limit %d", q, tc.limit)
			}
		})
	}
}
