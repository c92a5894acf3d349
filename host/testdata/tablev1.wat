;; A version 1 guest that declares a node table (in _initialize) and then
;; runs filter_nodes the version 1 way: select_node, set_status for node 1,
;; nothing for node 2. The host must never fill the table, and give node 0
;; Success, node 1 Unschedulable and node 2 the unselected Error.
(module
  (import "wasmsched" "node_table" (func $node_table (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "select_node" (func $select (param i32) (result i32)))
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\01\00\00\00\0a\00\00\00label:team")
  (data (i32.const 32) "v1 rejects node 1")
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "_initialize")
    (drop (call $node_table (i32.const 0) (i32.const 18) (i32.const 1024) (i32.const 32))))
  (func (export "filter") (param i64))
  (func (export "filter_nodes") (param i64 i32)
    (drop (call $select (i32.const 0)))
    (drop (call $select (i32.const 1)))
    (call $status (i32.const 2) (i32.const 32) (i32.const 17))
    ;; trap if the host filled the table: its header's n would be 3
    (if (i32.ne (i32.load (i32.const 1032)) (i32.const 0)) (then unreachable))))
