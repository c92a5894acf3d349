;; A table declared with 2^30 entries: instantiating it would allocate
;; 8 GiB of host memory. Refused at load (TestDeclarationLimits).
(module
  (memory (export "memory") 1)
  (table 1073741824 funcref)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)))
