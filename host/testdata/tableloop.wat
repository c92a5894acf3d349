;; A version 2 guest with a one-column node table that gives node 0 a
;; verdict in its row and then loops forever on node 1: the call must end
;; at node 1's deadline, node 1 gets the failure, node 0 keeps its verdict.
;; Before looping it writes 0 to current again, which must not restart
;; the deadline (only a larger index counts).
(module
  (import "wasmsched" "node_table" (func $node_table (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "reason_register" (func $reason (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\01\00\00\00\0a\00\00\00label:team")
  (data (i32.const 32) "node 0 rejected")
  (func (export "abi_version") (result i32) (i32.const 2))
  (func (export "_initialize")
    (drop (call $node_table (i32.const 0) (i32.const 18) (i32.const 1024) (i32.const 32))))
  (func (export "filter") (param i64))
  (func (export "filter_nodes") (param i64 i32)
    (i32.store (i32.const 1028) (i32.const 0))
    (i32.store (i32.const 1040) (i32.const 2))
    (i32.store (i32.const 1044) (call $reason (i32.const 32) (i32.const 15)))
    (i32.store (i32.const 1028) (i32.const 1))
    (loop $spin
      (i32.store (i32.const 1028) (i32.const 0))
      (br $spin))))
