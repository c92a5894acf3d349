;; A module that declares a memory maximum of 2 pages: score returns what
;; memory.grow by 5 pages answers (-1: the declared maximum holds, below
;; memoryLimit), then by 1 page (1, the old size in pages).
(module
  (memory (export "memory") 1 2)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "score") (param i64) (result i64)
    (i64.add
      (i64.mul (i64.extend_i32_s (memory.grow (i32.const 5))) (i64.const 1000))
      (i64.extend_i32_s (memory.grow (i32.const 1))))))
