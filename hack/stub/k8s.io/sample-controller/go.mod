// An empty stand-in for a k8s.io staging module the module proxy does not
// serve at the pinned version; nothing in wasmsched imports it.
module k8s.io/sample-controller
