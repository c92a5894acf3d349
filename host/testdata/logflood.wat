;; Log-flood fixture: every filter call writes 64 KiB of newlines to stdout
;; in one fd_write, the way a hostile or careless policy floods the log.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (memory.fill (i32.const 1024) (i32.const 10) (i32.const 65536))
    (i32.store (i32.const 0) (i32.const 1024))   ;; iovec.buf
    (i32.store (i32.const 4) (i32.const 65536))  ;; iovec.len
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
