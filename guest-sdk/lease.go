package sdk

import "time"

// Lease is a coordination.k8s.io/v1 Lease as a policy reads it through a
// granted object read: the kubelet's heartbeat (namespace
// kube-node-lease, named after its node) or a controller's leader lock.
type Lease struct {
	Namespace, Name string
	// HolderIdentity is spec.holderIdentity ("" when the read does not
	// declare it, or the Lease has no holder).
	HolderIdentity string
	// RenewTime is spec.renewTime; zero when the Lease was never renewed.
	RenewTime time.Time
}

// Leases reads Leases through the policy's declared read i, which must be
// {apiVersion: coordination.k8s.io/v1, kind: Lease, fields:
// [spec.renewTime, spec.holderIdentity]} in this order (holderIdentity
// may be left out), so that a policy gets typed values rather than the
// fields' text.
type Leases struct{ o Objects }

// LeasesOf returns the Lease reader of the policy's declared read i.
func LeasesOf(i int) Leases { return Leases{ObjectsOf(i)} }

// Get returns the Lease namespace/name, and false when there is none (or
// the policy may not read its namespace). A renewTime that does not parse
// as RFC 3339 is an error naming it.
func (l Leases) Get(namespace, name string) (Lease, bool, error) {
	f, ok := l.o.Get(namespace, name)
	if !ok {
		return Lease{}, false, nil
	}
	lease, err := leaseOf(namespace, name, f)
	return lease, true, err
}

// List returns the Leases of namespace ("" for every namespace the policy
// may read) whose labels match selector, ordered by namespace and name.
func (l Leases) List(namespace, selector string) ([]Lease, error) {
	objs, err := l.o.List(namespace, selector)
	if err != nil {
		return nil, err
	}
	out := make([]Lease, 0, len(objs))
	for _, o := range objs {
		lease, err := leaseOf(o.Namespace, o.Name, o.Fields)
		if err != nil {
			return nil, err
		}
		out = append(out, lease)
	}
	return out, nil
}

func leaseOf(namespace, name string, f []string) (Lease, error) {
	l := Lease{Namespace: namespace, Name: name}
	if len(f) > 1 {
		l.HolderIdentity = f[1]
	}
	if len(f) > 0 && f[0] != "" {
		t, err := time.Parse(time.RFC3339Nano, f[0])
		if err != nil {
			return l, &LeaseError{Namespace: namespace, Name: name, RenewTime: f[0]}
		}
		l.RenewTime = t
	}
	return l, nil
}

// LeaseError is a Lease whose declared first field is not an RFC 3339
// time: most likely a read that does not declare spec.renewTime first.
type LeaseError struct{ Namespace, Name, RenewTime string }

func (e *LeaseError) Error() string {
	return "the Lease " + e.Namespace + "/" + e.Name + " has a renewTime that does not parse: " + e.RenewTime +
		" (declare the read's fields as [spec.renewTime, spec.holderIdentity])"
}
