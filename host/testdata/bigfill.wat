;; A call that cannot be interrupted for ~100 ms: four memory.fill of
;; 256 MiB in a row, with no loop back-edge or call between them where the
;; deadline could stop the guest. Used only to show that the deadline tests
;; catch such a step (TestDeadlineCheckCatchesUninterruptibleStep).
(module
  (memory (export "memory") 4096)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (memory.fill (i32.const 0) (i32.const 1) (i32.const 268435456))
    (memory.fill (i32.const 0) (i32.const 2) (i32.const 268435456))
    (memory.fill (i32.const 0) (i32.const 3) (i32.const 268435456))
    (memory.fill (i32.const 0) (i32.const 4) (i32.const 268435456))))
