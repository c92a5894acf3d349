;; Filter reads the realtime clock and 8 random bytes through WASI and stores
;; them (16 bytes) as the cycle state, so a test can see what the sandbox gave.
(module
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "wasmsched" "cycle_state_set" (func $store (param i32 i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (drop (call $clock (i32.const 0) (i64.const 1) (i32.const 0)))
    (drop (call $random (i32.const 8) (i32.const 8)))
    (call $store (i32.const 0) (i32.const 16))))
