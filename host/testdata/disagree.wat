;; A guest whose batch form disagrees with its single form, as §3.1 forbids:
;; filter rejects every node with "no"; filter_nodes forgets to reject the
;; batch's node 1 (and passes it). `wasmsched test` must name that node.
(module
  (import "wasmsched" "set_status" (func $set_status (param i32 i32 i32)))
  (import "wasmsched" "select_node" (func $select (param i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "no")
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (call $set_status (i32.const 2) (i32.const 0) (i32.const 2)))
  (func (export "filter_nodes") (param i64 i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get 1)))
        (drop (call $select (local.get $i)))
        (if (i32.ne (local.get $i) (i32.const 1))
          (then (call $set_status (i32.const 2) (i32.const 0) (i32.const 2))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))))
