;; filter has the wrong signature: must be refused, naming the export.
(module
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i32) (result i32) (i32.const 0)))
