;; The edges of the ABI v3 gate and patch functions (host TestGateFunctionEdges).
;; Each check traps (unreachable) when the host answers otherwise, so a
;; call that returns normally passed all of them.
(module
  (import "wasmsched" "recheck_on" (func $recheck (param i32 i32) (result i32)))
  (import "wasmsched" "patch_label" (func $label (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "patch_annotation" (func $annot (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "cycle_policies" (func $policies (param i32 i32) (result i32)))
  (import "wasmsched" "set_status" (func $status (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "ok.example.com/a")          ;; 16 bytes at 0
  (data (i32.const 16) "kubernetes.io/x")          ;; 15 bytes at 16
  (data (i32.const 32) "v1")                       ;; 2 bytes at 32
  (data (i32.const 40) "not a value")              ;; 11 bytes at 40
  (data (i32.const 64) "gated")                    ;; 5 bytes at 64
  (func (export "abi_version") (result i32) (i32.const 3))
  (func (export "capabilities") (result i32) (i32.const 386)) ;; filter, preenqueue, prebind
  (func (export "filter") (param i64)
    ;; outside preenqueue and prebind: -3 (NotAvailable)
    (if (i32.ne (call $recheck (i32.const 1) (i32.const 0)) (i32.const -3)) (then unreachable))
    (if (i32.ne (call $label (i32.const 0) (i32.const 16) (i32.const 32) (i32.const 2)) (i32.const -3)) (then unreachable))
    (if (i32.ne (call $policies (i32.const 0) (i32.const 0)) (i32.const -3)) (then unreachable)))
  (func (export "preenqueue") (param i64)
    ;; an unknown event bit: -2
    (if (i32.ne (call $recheck (i32.const 8) (i32.const 0)) (i32.const -2)) (then unreachable))
    ;; no patches here: -3
    (if (i32.ne (call $annot (i32.const 0) (i32.const 16) (i32.const 32) (i32.const 2)) (i32.const -3)) (then unreachable))
    ;; pods change, after 10 ms: the host clamps the delay to 1 s
    (if (i32.ne (call $recheck (i32.const 2) (i32.const 10)) (i32.const 0)) (then unreachable))
    (call $status (i32.const 3) (i32.const 64) (i32.const 5)))
  (func (export "prebind") (param i64)
    (if (i32.ne (call $recheck (i32.const 1) (i32.const 0)) (i32.const -3)) (then unreachable))
    ;; a key outside memory: -2
    (if (i32.ne (call $label (i32.const 70000) (i32.const 16) (i32.const 32) (i32.const 2)) (i32.const -2)) (then unreachable))
    ;; a length past the patch limit is refused before it is read: -6
    (if (i32.ne (call $annot (i32.const 0) (i32.const 16) (i32.const 0) (i32.const 1000000)) (i32.const -6)) (then unreachable))
    ;; a key outside the allowed prefixes: -5
    (if (i32.ne (call $label (i32.const 16) (i32.const 15) (i32.const 32) (i32.const 2)) (i32.const -5)) (then unreachable))
    ;; an invalid label value: -2
    (if (i32.ne (call $label (i32.const 0) (i32.const 16) (i32.const 40) (i32.const 11)) (i32.const -2)) (then unreachable))
    ;; the same key twice: the second value wins
    (if (i32.ne (call $label (i32.const 0) (i32.const 16) (i32.const 40) (i32.const 2)) (i32.const 0)) (then unreachable))
    (if (i32.ne (call $label (i32.const 0) (i32.const 16) (i32.const 32) (i32.const 2)) (i32.const 0)) (then unreachable))
    ;; an annotation value may hold anything
    (if (i32.ne (call $annot (i32.const 0) (i32.const 16) (i32.const 40) (i32.const 11)) (i32.const 0)) (then unreachable))
    ;; cycle_policies answers its size with a zero capacity
    (if (i32.le_s (call $policies (i32.const 0) (i32.const 0)) (i32.const 0)) (then unreachable))))
