;; A module whose initial memory (2000 pages, 125 MiB) is above the default
;; memoryLimit (64 MiB): refused at load, naming the limit.
(module
  (memory (export "memory") 2000)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)))
