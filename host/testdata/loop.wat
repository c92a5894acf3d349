;; Filter loops forever on cordoned (unschedulable) nodes and accepts others;
;; Score loops forever on cordoned nodes too.
(module
  (import "wasmsched" "node_unschedulable" (func $cordoned (result i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (if (call $cordoned) (then (loop $spin (br $spin)))))
  (func (export "score") (param i64) (result i64)
    (if (call $cordoned) (then (loop $spin (br $spin))))
    (i64.const 10)))
