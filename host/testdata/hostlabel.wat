;; Benchmark fixture: filter_nodes selects each node and reads its "team"
;; label (node_label), nothing else: two host calls per node, like the
;; team-isolation policy once its pod label is cached.
(module
  (import "wasmsched" "select_node" (func $select (param i32) (result i32)))
  (import "wasmsched" "node_label" (func $label (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "team")
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64))
  (func (export "filter_nodes") (param i64 i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get 1)))
        (drop (call $select (local.get $i)))
        (drop (call $label (i32.const 0) (i32.const 4) (i32.const 64) (i32.const 64)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))))
