package policyobjects

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
)

// statusLease elects the one replica that writes the policy objects'
// status. Every replica loads and serves the objects (a standby takes over
// scheduling with its policies warm); only the lease holder writes, so two
// replicas never fight over a status. A plugin cannot see kube-scheduler's
// own leader election, so the status has its own Lease (docs/architecture.md,
// RATIONALE: policy objects). One elector serves every plugin of the process
// (one per scheduler profile) that names the same Lease.
type statusLease struct {
	identity string
	le       *leaderelection.LeaderElector
	cancel   context.CancelFunc

	mu   sync.Mutex
	refs int
	subs map[*Controller]struct{}
	// claims are, per object, the profiles whose plugins run it: only the
	// first profile's plugin writes its status, so two profiles never
	// overwrite each other's view.
	claims map[key]map[string]bool
}

// leading reports whether this process holds the lease now (asked of the
// elector at each write, not remembered from its callbacks, which run on
// goroutines of their own and may arrive out of order).
func (l *statusLease) leading() bool { return l.le.IsLeader() }

// claim records that profile's plugin runs object k; release forgets it.
func (l *statusLease) claim(k key, profile string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.claims[k] == nil {
		l.claims[k] = map[string]bool{}
	}
	l.claims[k][profile] = true
}

func (l *statusLease) release(k key, profile string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.claims[k], profile)
	if len(l.claims[k]) == 0 {
		delete(l.claims, k)
	}
}

// writes reports whether profile's plugin writes k's status: the first
// profile, by name, of those that run it.
func (l *statusLease) writes(k key, profile string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range l.claims[k] {
		if p < profile {
			return false
		}
	}
	return l.claims[k][profile]
}

var (
	leasesMu sync.Mutex
	leases   = map[config.LeaseRef]*statusLease{}
)

// Lease timing, as kube-scheduler's defaults: a dead holder is replaced
// within about 15 s.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// joinStatusLease returns the process's elector for ref, starting it on
// first use, and subscribes c to its leadership changes.
func joinStatusLease(client kubernetes.Interface, ref config.LeaseRef, c *Controller) (*statusLease, error) {
	leasesMu.Lock()
	defer leasesMu.Unlock()
	l := leases[ref]
	if l == nil {
		host, err := os.Hostname()
		if err != nil {
			host = "unknown"
		}
		l = &statusLease{identity: host + "_" + string(uuid.NewUUID()), subs: map[*Controller]struct{}{}, claims: map[key]map[string]bool{}}
		lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ref.Namespace, ref.Name, nil, client.CoordinationV1(),
			resourcelock.ResourceLockConfig{Identity: l.identity})
		if err != nil {
			return nil, fmt.Errorf("policyObjects.statusLease %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		cfg := leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnCancel: true, Name: "wasmsched-policy-status",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					klog.InfoS("Writing policy objects' status: holding the status lease", "lease", klog.KRef(ref.Namespace, ref.Name), "identity", l.identity)
					l.notify()
				},
				OnStoppedLeading: func() {
					klog.InfoS("Stopped writing policy objects' status: lost the status lease", "lease", klog.KRef(ref.Namespace, ref.Name), "identity", l.identity)
				},
			},
		}
		le, err := leaderelection.NewLeaderElector(cfg)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("policyObjects.statusLease %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		l.le = le
		go func() {
			// Run returns when the lease is lost; campaign again until the
			// process's last plugin leaves.
			for ctx.Err() == nil {
				le.Run(ctx)
			}
		}()
		leases[ref] = l
	}
	l.mu.Lock()
	l.refs++
	l.subs[c] = struct{}{}
	l.mu.Unlock()
	return l, nil
}

// leave unsubscribes c; the last one out releases the lease.
func (l *statusLease) leave(ref config.LeaseRef, c *Controller) {
	leasesMu.Lock()
	defer leasesMu.Unlock()
	l.mu.Lock()
	delete(l.subs, c)
	l.refs--
	last := l.refs == 0
	l.mu.Unlock()
	if last {
		l.cancel()
		delete(leases, ref)
	}
}

// notify tells every subscriber that this process now writes status.
func (l *statusLease) notify() {
	l.mu.Lock()
	subs := make([]*Controller, 0, len(l.subs))
	for c := range l.subs {
		subs = append(subs, c)
	}
	l.mu.Unlock()
	for _, c := range subs {
		c.enqueueAll()
	}
}
