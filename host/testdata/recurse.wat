;; Filter recurses without end: the host must end it as a trap (stack
;; overflow), discard the instance and keep serving.
(module
  (memory (export "memory") 1)
  (func $down (param i64) (result i64) (i64.add (call $down (local.get 0)) (i64.const 1)))
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64) (drop (call $down (local.get 0)))))
