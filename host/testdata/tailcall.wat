;; wat2wasm: --enable-tail-call
;; A tail call (a proposal the host does not enable): the load is refused
;; at compile time, naming the feature (host.TestWasmFeatures).
(module
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func $one (result i32) (i32.const 1))
  (func $viaTail (result i32) (return_call $one))
  (func (export "filter") (param i64) (drop (call $viaTail))))
