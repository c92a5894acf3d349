package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func next(t *testing.T, ch <-chan Update) Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update within 10s")
	}
	return Update{}
}

func TestConfigMapUpdates(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "policy", Namespace: "ns"}, BinaryData: map[string][]byte{"k": []byte("v1")}}
	other := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "ns"}, BinaryData: map[string][]byte{"k": []byte("no")}}
	client := fake.NewClientset(cm, other)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan Update, 10)
	go (&ConfigMap{Client: client, Namespace: "ns", Name: "policy", Key: "k"}).Run(ctx, func(u Update) { ch <- u })
	if u := next(t, ch); string(u.Data) != "v1" || u.Object == nil {
		t.Fatalf("first update = %+v", u)
	}
	// A change to another key does not report; a change to the key does.
	cm.Data = map[string]string{"note": "x"}
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm.BinaryData["k"] = []byte("v2")
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := next(t, ch); string(u.Data) != "v2" {
		t.Fatalf("second update = %q, want v2", u.Data)
	}
	// Text data is accepted too; a missing key and a deletion are reported as errors.
	delete(cm.BinaryData, "k")
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := next(t, ch); u.Err == nil || !strings.Contains(u.Err.Error(), `no key "k"`) {
		t.Fatalf("missing key update = %+v", u)
	}
	if err := client.CoreV1().ConfigMaps("ns").Delete(ctx, "policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := next(t, ch); u.Err == nil || !strings.Contains(u.Err.Error(), "deleted") {
		t.Fatalf("delete update = %+v", u)
	}
}

func TestFileUpdates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.wasm")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan Update, 10)
	go (&File{Path: path, Interval: 20 * time.Millisecond}).Run(ctx, func(u Update) { ch <- u })
	if u := next(t, ch); u.Err == nil {
		t.Fatalf("missing file: %+v", u)
	}
	write := func(s string) {
		if err := os.WriteFile(path+".tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	if u := next(t, ch); string(u.Data) != "one" {
		t.Fatalf("update = %+v", u)
	}
	// A symlink swap, as ConfigMap volumes do.
	if err := os.WriteFile(filepath.Join(dir, "two"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "two"), path+".lnk"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".lnk", path); err != nil {
		t.Fatal(err)
	}
	if u := next(t, ch); string(u.Data) != "two" {
		t.Fatalf("update after symlink swap = %+v", u)
	}
}
