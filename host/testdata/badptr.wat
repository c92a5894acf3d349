;; Passes out-of-range pointers and lengths to host functions; the host must
;; answer with error codes (or a placeholder reason), never crash or trap.
(module
  (import "wasmsched" "node_label" (func $label (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "pod_list" (func $plist (param i32 i32 i32) (result i32)))
  (import "wasmsched" "config" (func $config (param i32 i32) (result i32)))
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    ;; key outside memory: must return -2 (BadArgs)
    (if (i32.ne (call $label (i32.const 70000) (i32.const 4) (i32.const 0) (i32.const 16)) (i32.const -2)) (then unreachable))
    ;; unknown list kind: -2
    (if (i32.ne (call $plist (i32.const 99) (i32.const 0) (i32.const 16)) (i32.const -2)) (then unreachable))
    ;; output buffer outside memory with a large capacity: -2
    (if (i32.ne (call $config (i32.const 65535) (i32.const 1000)) (i32.const -2)) (then unreachable))
    ;; reason pointer outside memory: the host substitutes a placeholder
    (call $status (i32.const 2) (i32.const -16) (i32.const 100))))
