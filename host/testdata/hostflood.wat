;; Host calls whose work grows with their arguments, each in a loop or with
;; huge buffers: filter fills 64 MiB with random_get in a loop; score writes
;; one fd_write of 400 iovecs of 63 MiB each (no newline: one line that must
;; be cut at 16 KiB); prefilter looks up a 63 MiB label key in a loop;
;; preenqueue sleeps an hour in poll_oneoff (with the real clock). Each call
;; must end within its timeout + 10 ms (TestHostCallsEndWithinTimeout).
(module
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "pod_label" (func $label (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1024 1024)
  (func (export "abi_version") (result i32) (i32.const 3))
  (func (export "filter") (param i64)
    (loop $again
      (drop (call $random (i32.const 0) (i32.const 67108864)))
      (br $again)))
  (func (export "score") (param i64) (result i64)
    (local $i i32)
    ;; "AAAA…" for the first 64 KiB only: the line is cut at 16 KiB, and
    ;; filling all 63 MiB touched every page of a fresh memory, which took
    ;; longer than the timeout on some machines, so the write never ran.
    ;; The iovecs still cover 63 MiB each (zeros past the fill).
    (memory.fill (i32.const 0) (i32.const 65) (i32.const 65536))
    ;; 400 iovecs at 66060288 (63 MiB): each {ptr 0, len 66060288}
    (loop $fill
      (i32.store (i32.add (i32.const 66060288) (i32.mul (local.get $i) (i32.const 8))) (i32.const 0))
      (i32.store (i32.add (i32.const 66060292) (i32.mul (local.get $i) (i32.const 8))) (i32.const 66060288))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fill (i32.lt_u (local.get $i) (i32.const 400))))
    (drop (call $write (i32.const 1) (i32.const 66060288) (i32.const 400) (i32.const 66064000)))
    (i64.const 0))
  (func (export "prefilter") (param i64)
    (loop $again
      (drop (call $label (i32.const 0) (i32.const 66060288) (i32.const 0) (i32.const 0)))
      (br $again)))
  (func (export "preenqueue") (param i64)
    ;; one clock subscription (tag 0 at 8), monotonic clock (1 at 16),
    ;; timeout of an hour (at 24)
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const 3600000000000))
    (drop (call $poll (i32.const 0) (i32.const 1024) (i32.const 1) (i32.const 2048)))))
