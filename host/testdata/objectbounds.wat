;; Object read bounds fixture (host.TestObjectReadBounds): filter stores
;; at 2048 the answers of object_get("", "ns/name"), which holds a '/'
;; and must not reach another namespace's key; of object_get("default",
;; "big"), an object whose declared field passes 1 MiB; and of
;; object_list("", "") over the same big object, each with a buffer of 0
;; bytes, as i32s.
(module
  (import "wasmsched" "object_get" (func $get (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "object_list" (func $list (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "ns/name")
  (data (i32.const 16) "default")
  (data (i32.const 32) "big")
  (func (export "abi_version") (result i32) (i32.const 4))
  (func (export "capabilities") (result i32) (i32.const 0x2))
  (func (export "filter") (param i64)
    (i32.store (i32.const 2048) (call $get (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 7) (i32.const 0) (i32.const 0)))
    (i32.store (i32.const 2052) (call $get (i32.const 0) (i32.const 16) (i32.const 7) (i32.const 32) (i32.const 3) (i32.const 0) (i32.const 0)))
    (i32.store (i32.const 2056) (call $list (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))))
