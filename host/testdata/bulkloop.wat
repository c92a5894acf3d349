;; Loops whose body is one bulk instruction over the whole memory (64 MiB):
;; filter fills it, score copies one half over the other, prefilter inits it
;; from a data segment, and filter_nodes grows and fills a table. One
;; iteration is one fuel unit but milliseconds of work: the rewriter charges
;; bulk instructions by their length (host/internal/fuel), so each call ends
;; at its deadline (TestBulkLoopsEndWithinTimeout).
(module
  (memory (export "memory") 1024 1024)
  (table $t 1 funcref)
  (data $d "0123456789abcdef")
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (loop $again
      (memory.fill (i32.const 0) (i32.const 7) (i32.const 67108864))
      (br $again)))
  (func (export "score") (param i64) (result i64)
    (loop $again
      (memory.copy (i32.const 0) (i32.const 33554432) (i32.const 33554432))
      (br $again))
    (i64.const 0))
  (func (export "prefilter") (param i64)
    (loop $again
      (memory.init $d (i32.const 0) (i32.const 0) (i32.const 16))
      (br $again)))
  (func (export "filter_nodes") (param i64 i32)
    (drop (table.grow $t (ref.null func) (i32.const 65536)))
    (loop $again
      (table.fill $t (i32.const 0) (ref.null func) (table.size $t))
      (br $again))))
