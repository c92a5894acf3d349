;; Filter writes two 16 KiB lines to stdout, each within the log's 16 KiB
;; line limit as written by the guest, but not as klog writes them: one of
;; NUL bytes (each escaped as \x00 by klog) and one of double quotes (each
;; escaped as \"). The log must hold the limit as written.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    ;; 16 KiB of NUL at 1024 (fresh memory is zero), then a newline.
    (i32.store8 (i32.const 17408) (i32.const 10))
    (i32.store (i32.const 0) (i32.const 1024))
    (i32.store (i32.const 4) (i32.const 16385))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    ;; 16 KiB of '"' at 20480, then a newline.
    (memory.fill (i32.const 20480) (i32.const 34) (i32.const 16384))
    (i32.store8 (i32.const 36864) (i32.const 10))
    (i32.store (i32.const 0) (i32.const 20480))
    (i32.store (i32.const 4) (i32.const 16385))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
