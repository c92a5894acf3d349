;; Filter asks WASI for the environment; it must be empty. It rejects the
;; node with the reason "env" if any variable is visible.
(module
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $sizes (param i32 i32) (result i32)))
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "env")
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (drop (call $sizes (i32.const 0) (i32.const 4)))
    (if (i32.or (i32.load (i32.const 0)) (i32.load (i32.const 4)))
      (then (call $status (i32.const 2) (i32.const 64) (i32.const 3))))))
