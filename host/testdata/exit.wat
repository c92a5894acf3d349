;; Filter calls proc_exit(3) in the middle of a call.
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64) (call $exit (i32.const 3))))
