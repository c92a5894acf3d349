;; A command module whose _start returns normally; it must be usable.
(module
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (memory (export "memory") 1)
  (global $started (mut i32) (i32.const 0))
  (data (i32.const 0) "not started")
  (func (export "_start") (global.set $started (i32.const 1)))
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (if (i32.eqz (global.get $started)) (then (call $status (i32.const 1) (i32.const 0) (i32.const 11))))))
