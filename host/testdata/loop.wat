;; Filter loops forever on cordoned (unschedulable) nodes and accepts others;
;; Score loops forever on cordoned nodes too. filter_nodes is the batch form:
;; it accepts nodes until it reaches a cordoned one, where it loops.
(module
  (import "wasmsched" "node_unschedulable" (func $cordoned (result i32)))
  (import "wasmsched" "select_node" (func $select (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (if (call $cordoned) (then (loop $spin (br $spin)))))
  (func (export "filter_nodes") (param i64 i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get 1)))
        (drop (call $select (local.get $i)))
        (if (call $cordoned) (then (loop $spin (br $spin))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))
  (func (export "score") (param i64) (result i64)
    (if (call $cordoned) (then (loop $spin (br $spin))))
    (i64.const 10)))
