;; Reports ABI version 2: must be refused.
(module
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 2))
  (func (export "filter") (param i64)))
