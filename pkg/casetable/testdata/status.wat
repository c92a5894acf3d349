;; Returns, from filter, the status its node's name asks for: the name's
;; first byte minus '0' is the code ("1-…" is Error, "2-…" Unschedulable,
;; "3-…" UnschedulableAndUnresolvable, "5-…" Skip, "4-…" an unknown code,
;; "0-…" Success), with the reason "why". casetable's TestStatusIsTheScheduler
;; runs it through a case table and through the WasmPolicy plugin.
(module
  (import "wasmsched" "node_string" (func $node_string (param i32 i32 i32) (result i32)))
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "why")
  (func (export "abi_version") (result i32) (i32.const 3))
  (func (export "filter") (param i64)
    (local $code i32)
    (drop (call $node_string (i32.const 0) (i32.const 64) (i32.const 64)))
    (local.set $code (i32.sub (i32.load8_u (i32.const 64)) (i32.const 48)))
    (if (local.get $code)
      (then (call $status (local.get $code) (i32.const 16) (i32.const 3))))))
