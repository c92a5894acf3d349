;; Filter hits `unreachable` on cordoned nodes, divides by zero on nodes with
;; pods, and accepts others.
(module
  (import "wasmsched" "node_unschedulable" (func $cordoned (result i32)))
  (import "wasmsched" "node_pod_count" (func $pods (result i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (if (call $cordoned) (then unreachable))
    (drop (i32.div_u (i32.const 1) (i32.sub (i32.const 1) (call $pods))))))
