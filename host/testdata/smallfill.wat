;; A loop whose body is constant memory.fill instructions of 256 bytes,
;; which the instrumentation writes as inline stores without a charge: the
;; loop's own check must still end the call at its deadline
;; (TestBulkLoopsEndWithinTimeout), and the fixture seeds FuzzInstrument
;; with the shape.
(module
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (loop $again
      (memory.fill (i32.const 0) (i32.const 7) (i32.const 256))
      (memory.fill (i32.const 256) (i32.const 0) (i32.const 255))
      (memory.fill (i32.const 65535) (i32.const 1) (i32.const 1))
      (br $again))))
