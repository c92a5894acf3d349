;; docs/abi.md §3.2's example, verbatim (host.TestNodeTableDocExample checks
;; that the two stay the same).
(module
  (import "wasmsched" "node_table" (func $node_table (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "reason_register" (func $reason (param i32 i32) (result i32)))
  (import "wasmsched" "pod_label_id" (func $pod_label_id (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; string list ["label:team"]: count 1, length 10, bytes
  (data (i32.const 0) "\01\00\00\00\0a\00\00\00label:team")
  (data (i32.const 32) "team")
  (data (i32.const 48) "team label mismatch")
  (global $mismatch (mut i32) (i32.const 0))
  (func (export "abi_version") (result i32) (i32.const 2))
  (func (export "_initialize")
    ;; table at 1024, 32 rows of 16 + 8 bytes
    (drop (call $node_table (i32.const 0) (i32.const 18) (i32.const 1024) (i32.const 32)))
    (global.set $mismatch (call $reason (i32.const 48) (i32.const 19))))
  (func (export "filter") (param i64))  ;; single calls: see §4
  (func (export "filter_nodes") (param i64 i32)
    (local $i i32) (local $row i32) (local $pod i32)
    (local.set $pod (call $pod_label_id (i32.const 32) (i32.const 4)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get 1)))
        (i32.store (i32.const 1028) (local.get $i))                      ;; current
        (local.set $row (i32.add (i32.const 1040) (i32.mul (local.get $i) (i32.const 24))))
        (if (i32.eq (i32.load (i32.add (local.get $row) (i32.const 16))) (local.get $pod))
          (then (i32.store (local.get $row) (i32.const 0)))              ;; Success
          (else
            (i32.store (local.get $row) (i32.const 2))                   ;; Unschedulable
            (i32.store offset=4 (local.get $row) (global.get $mismatch))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.store (i32.const 1032) (i32.const 0))))                         ;; n: consumed
