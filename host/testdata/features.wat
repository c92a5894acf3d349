;; Uses each proposal of WebAssembly 2.0 that the host enables (wazero's
;; CoreFeaturesV2): SIMD, multi-value, reference types, bulk memory, sign
;; extension, non-trapping float-to-int, mutable globals. It must load and
;; its filter must pass (host.TestWasmFeatures).
(module
  (memory (export "memory") 1)
  (table 1 funcref)
  (global $g (mut i32) (i32.const 0))
  (func (export "abi_version") (result i32) (i32.const 1))
  (func $pair (result i32 i32) (i32.const 1) (i32.const 2))
  (func (export "filter") (param i64)
    (drop (i32x4.extract_lane 0 (i32x4.splat (i32.const 7))))
    (drop (drop (call $pair)))
    (drop (ref.is_null (table.get 0 (i32.const 0))))
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 16))
    (drop (i32.extend8_s (i32.const 255)))
    (drop (i32.trunc_sat_f32_s (f32.const 1e30)))
    (global.set $g (i32.const 1))))
