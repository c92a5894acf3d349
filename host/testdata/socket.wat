;; Imports a socket function: must be refused at load, naming it.
(module
  (import "wasi_snapshot_preview1" "sock_accept" (func $accept (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)))
