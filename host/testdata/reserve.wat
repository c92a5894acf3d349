;; Counters fixture (host.TestReserveCounters): reserve takes 1 of "seats"
;; for the pod, then does what the pod's label "then" says: "trap" traps,
;; "refuse" sets Unschedulable, anything else passes. unreserve traps.
;; It declares KeepsState (capability bit 1<<30) with filter, reserve and
;; unreserve.
(module
  (import "wasmsched" "counter_add" (func $add (param i32 i32 i64) (result i64)))
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (import "wasmsched" "pod_label" (func $label (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "seats")
  (data (i32.const 16) "then")
  (data (i32.const 32) "refused")
  (func (export "abi_version") (result i32) (i32.const 4))
  (func (export "capabilities") (result i32) (i32.const 0x40001802))
  (func (export "filter") (param i64))
  (func (export "reserve") (param i64)
    (drop (call $add (i32.const 0) (i32.const 5) (i64.const 1)))
    (if (i32.gt_s (call $label (i32.const 16) (i32.const 4) (i32.const 1024) (i32.const 16)) (i32.const 0))
      (then
        (if (i32.eq (i32.load8_u (i32.const 1024)) (i32.const 116)) ;; 't'rap
          (then unreachable))
        (if (i32.eq (i32.load8_u (i32.const 1024)) (i32.const 114)) ;; 'r'efuse
          (then (call $status (i32.const 2) (i32.const 32) (i32.const 7)))))))
  (func (export "unreserve") (param i64) unreachable))
