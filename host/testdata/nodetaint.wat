;; node_taint fixture. filter reads the taints with key "dedicated" into
;; memory at 64 and sets Unschedulable with the raw string list as the
;; reason; when node_taint returns a negative value n, the reason is one of
;; the words at 8-8n: "notfound" (-1), "badargs " (-2), "notavail" (-3).
;; prefilter makes the same read (no node: notavail); score reads a key
;; outside memory (badargs).
(module
  (import "wasmsched" "node_taint" (func $taint (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "dedicated")
  (data (i32.const 16) "notfoundbadargs notavail")
  (func $report (param $n i32)
    (if (i32.lt_s (local.get $n) (i32.const 0))
      (then (call $status (i32.const 2)
              (i32.sub (i32.const 8) (i32.mul (i32.const 8) (local.get $n))) (i32.const 8)))
      (else (call $status (i32.const 2) (i32.const 64) (local.get $n)))))
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "prefilter") (param i64)
    (call $report (call $taint (i32.const 0) (i32.const 9) (i32.const 64) (i32.const 1024))))
  (func (export "filter") (param i64)
    (call $report (call $taint (i32.const 0) (i32.const 9) (i32.const 64) (i32.const 1024))))
  (func (export "score") (param i64) (result i64)
    (call $report (call $taint (i32.const 70000) (i32.const 9) (i32.const 64) (i32.const 1024)))
    (i64.const 0)))
