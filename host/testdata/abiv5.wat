;; Reports ABI version 5, which this host does not implement: must be refused.
(module
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 5))
  (func (export "filter") (param i64)))
