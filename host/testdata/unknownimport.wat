;; Imports a function from an unknown module and an unknown host function.
(module
  (import "env" "exfiltrate" (func $x (param i32)))
  (import "wasmsched" "open_socket" (func $y (result i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)))
