;; Context-matrix fixture: every extension point reads the node's name
;; (node_string field 0) and sets Unschedulable when the host answers
;; NotAvailable (-3), so a test can check that node data is available
;; exactly where abi.Points says (TestNodeDataMatchesPoints).
(module
  (import "wasmsched" "node_string" (func $node_string (param i32 i32 i32) (result i32)))
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (import "wasmsched" "select_node" (func $select (param i32) (result i32)))
  (memory (export "memory") 1)
  (func $probe
    (if (i32.eq (call $node_string (i32.const 0) (i32.const 64) (i32.const 64)) (i32.const -3))
      (then (call $status (i32.const 2) (i32.const 0) (i32.const 0)))))
  (func (export "abi_version") (result i32) (i32.const 4))
  ;; Every point, and KeepsState (1<<30), which reserve and unreserve need.
  (func (export "capabilities") (result i32) (i32.const 0x40003fff))
  (func (export "prefilter") (param i64) (call $probe))
  (func (export "filter") (param i64) (call $probe))
  (func (export "prescore") (param i64) (call $probe))
  (func (export "score") (param i64) (result i64) (call $probe) (i64.const 0))
  (func (export "normalize_score") (param i64 i32) (call $probe))
  (func (export "filter_nodes") (param i64 i32)
    (drop (call $select (i32.const 0))) (call $probe))
  (func (export "score_nodes") (param i64 i32)
    (drop (call $select (i32.const 0))) (call $probe))
  (func (export "preenqueue") (param i64) (call $probe))
  (func (export "prebind") (param i64) (call $probe))
  (func (export "postfilter") (param i64) (call $probe))
  (func (export "postbind") (param i64) (call $probe))
  (func (export "reserve") (param i64) (call $probe))
  (func (export "unreserve") (param i64) (call $probe))
  (func (export "permit") (param i64) (result i64) (call $probe) (i64.const 0)))
