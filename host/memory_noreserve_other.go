//go:build darwin || freebsd

package host

const mapNoReserve = 0
