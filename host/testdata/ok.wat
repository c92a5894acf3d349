;; A minimal, well-behaved policy: Filter reads the node's pod count (so it
;; goes through a host function) and accepts; Score returns 50; a node named
;; "reject" is rejected with a reason set through set_status.
(module
  (import "wasmsched" "node_pod_count" (func $pods (result i32)))
  (import "wasmsched" "node_label" (func $label (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "verdict")
  (data (i32.const 32) "reject")
  (data (i32.const 128) "rejected by fixture")
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (drop (call $pods))
    ;; label "verdict" read into 64..127; if it equals "reject" (6 bytes), reject.
    (if (i32.eq (call $label (i32.const 16) (i32.const 7) (i32.const 64) (i32.const 64)) (i32.const 6))
      (then
        (if (i64.eq (i64.load (i32.const 64)) (i64.load (i32.const 32)))
          (then (call $status (i32.const 2) (i32.const 128) (i32.const 19)))))))
  (func (export "score") (param i64) (result i64) (i64.const 50)))
