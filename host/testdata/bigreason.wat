;; Filter rejects with a 10 MB reason (the host keeps 1024 bytes); score
;; returns 1000, outside 0..100, with no normalize_score.
(module
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (memory (export "memory") 161)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (memory.fill (i32.const 0) (i32.const 120) (i32.const 10485760))
    (call $status (i32.const 2) (i32.const 0) (i32.const 10485760)))
  (func (export "score") (param i64) (result i64) (i64.const 1000)))
