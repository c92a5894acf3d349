;; A policy that exports reserve without declaring KeepsState: the host
;; refuses it at load (host.TestReserveNeedsKeepsState).
(module
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 4))
  (func (export "filter") (param i64))
  (func (export "reserve") (param i64)))
