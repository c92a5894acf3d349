// Package source watches where policy modules come from and reports each new
// content: a file polled on an interval (hostPath or a mounted volume,
// including ConfigMap volumes that swap a symlink), or a ConfigMap watched
// through an informer restricted to that one object, or an OCI artifact in
// a registry (pinned by digest, or following a tag).
//
// A source never decides whether content is good; it only reports what it
// sees. The caller loads it and keeps the last good version on failure.
package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Update is new content seen at a source.
type Update struct {
	// Data is the module, raw or gzipped; nil when Err is set.
	Data []byte
	// Err says why the source has no usable content (file missing, key
	// missing, ConfigMap deleted). The caller keeps serving what it has.
	Err error
	// Object is the Kubernetes object the content came from, for events; nil for files.
	Object runtime.Object
	// Reason classifies Err for metrics and status (ReasonSourceError
	// when empty).
	Reason string
	// Digest is the OCI manifest digest the content was pulled as; "" for
	// other sources.
	Digest string
	// FromCache is set when an OCI source read nothing from the registry.
	FromCache bool
	// Loaded, when set, is called once the content loaded and serves.
	Loaded func()
}

// Source reports the content of one module location.
type Source interface {
	// Run reports the current content once available, then every change,
	// until ctx ends. It calls fn from one goroutine at a time.
	Run(ctx context.Context, fn func(Update))
	// String describes the source for logs and reasons.
	String() string
}

// File polls a file. Polling (rather than inotify) follows symlink swaps of
// mounted volumes, needs no watch limits, and costs one stat per interval.
type File struct {
	Path     string
	Interval time.Duration
}

func (f *File) String() string { return "file " + f.Path }

type fileStamp struct {
	mtime time.Time
	size  int64
	ino   uint64
}

// Run implements Source.
func (f *File) Run(ctx context.Context, fn func(Update)) {
	var last fileStamp
	// The digest of the last content, not the content: a source runs for
	// every policy, and keeping each module's bytes (megabytes for a Go
	// guest) would hold them all twice, here and in the compiled module.
	var lastSum [sha256.Size]byte
	var lastErr string
	check := func() {
		st, err := os.Stat(f.Path)
		if err != nil {
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				last = fileStamp{}
				fn(Update{Err: fmt.Errorf("reading %s: %w", f.Path, err)})
			}
			return
		}
		stamp := fileStamp{mtime: st.ModTime(), size: st.Size()}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			stamp.ino = sys.Ino
		}
		if stamp == last {
			return
		}
		data, err := os.ReadFile(f.Path)
		if err != nil {
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				fn(Update{Err: fmt.Errorf("reading %s: %w", f.Path, err)})
			}
			return
		}
		last, lastErr = stamp, ""
		sum := sha256.Sum256(data)
		if sum == lastSum {
			return
		}
		lastSum = sum
		fn(Update{Data: data})
	}
	check()
	t := time.NewTicker(f.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			check()
		}
	}
}

// ConfigMap watches one key of one ConfigMap. The informer lists and watches
// only that object (a metadata.name field selector in one namespace), so the
// scheduler needs get/list/watch on ConfigMaps in that namespace and caches
// nothing else.
type ConfigMap struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	Key       string
}

func (c *ConfigMap) String() string {
	return fmt.Sprintf("configmap %s/%s key %s", c.Namespace, c.Name, c.Key)
}

// Run implements Source.
func (c *ConfigMap) Run(ctx context.Context, fn func(Update)) {
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0,
		informers.WithNamespace(c.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "metadata.name=" + c.Name
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	updates := make(chan Update, 1)
	send := func(u Update) {
		// Only the newest content matters: replace anything not yet consumed.
		for {
			select {
			case updates <- u:
				return
			default:
				select {
				case <-updates:
				default:
				}
			}
		}
	}
	// Informer handlers run on one goroutine, so these need no lock.
	var lastData []byte
	var lastMissing bool
	onObj := func(obj interface{}) {
		cm, ok := obj.(*v1.ConfigMap)
		if !ok || cm.Name != c.Name {
			return
		}
		data, ok := cm.BinaryData[c.Key]
		if !ok {
			if s, ok2 := cm.Data[c.Key]; ok2 {
				data, ok = []byte(s), true
			}
		}
		if !ok {
			if !lastMissing {
				lastMissing, lastData = true, nil
				send(Update{Err: fmt.Errorf("configmap %s/%s has no key %q in binaryData or data", c.Namespace, c.Name, c.Key), Object: cm})
			}
			return
		}
		if lastData != nil && bytes.Equal(data, lastData) {
			return // an update to another key or to metadata
		}
		lastData, lastMissing = data, false
		send(Update{Data: data, Object: cm})
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onObj,
		UpdateFunc: func(_, obj interface{}) { onObj(obj) },
		DeleteFunc: func(obj interface{}) {
			lastData, lastMissing = nil, false
			send(Update{Err: fmt.Errorf("configmap %s/%s was deleted", c.Namespace, c.Name)})
		},
	})
	if err != nil {
		klog.ErrorS(err, "Could not watch policy ConfigMap", "configmap", klog.KRef(c.Namespace, c.Name))
		return
	}
	// A ConfigMap the scheduler may not read is reported, not waited for
	// forever: the informer retries, and the first success reports the content.
	var errMu sync.Mutex
	lastErr := ""
	_ = inf.SetWatchErrorHandlerWithContext(func(hctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			errMu.Lock()
			msg := err.Error()
			repeat := msg == lastErr
			lastErr = msg
			errMu.Unlock()
			if !repeat {
				send(Update{Err: fmt.Errorf("reading configmap %s/%s: %w (the scheduler needs get, list and watch on it in namespace %s: a Role naming it, or a RoleBinding of the ClusterRole wasmsched-policy-module-reader; see manifests/README.md)", c.Namespace, c.Name, err, c.Namespace)})
			}
		}
		cache.DefaultWatchErrorHandler(hctx, r, err)
	})
	factory.Start(ctx.Done())
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return
		}
		if len(inf.GetStore().List()) == 0 && ctx.Err() == nil {
			send(Update{Err: fmt.Errorf("configmap %s/%s not found", c.Namespace, c.Name)})
		}
	}()
	for {
		select {
		case <-ctx.Done():
			factory.Shutdown()
			return
		case u := <-updates:
			fn(u)
		}
	}
}

// ShortDigest is the first 12 hex digits of a module's sha256, as events,
// logs and statuses show it: enough to tell versions apart, short enough
// to read.
func ShortDigest(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
