;; Exports no entry point (filter, score, preenqueue, prebind): must be refused.
(module
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1)))
