;; Benchmark fixture: filter_nodes selects each node and makes one more host
;; call (node_pod_count), nothing else: the cost of host calls in a batch.
(module
  (import "wasmsched" "select_node" (func $select (param i32) (result i32)))
  (import "wasmsched" "node_pod_count" (func $pods (result i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64))
  (func (export "filter_nodes") (param i64 i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get 1)))
        (drop (call $select (local.get $i)))
        (drop (call $pods))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))))
