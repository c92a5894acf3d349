;; Fuzzing fixture for the placement points (host.FuzzPlacementFunctions):
;; reserve, permit and unreserve each read their cycle state (the fuzz
;; input) into memory at 0 and make up to 8 calls of the counter and
;; waiting-pod functions, each described by 20 bytes: a selector byte
;; (padded to 4) and four little-endian i32 arguments, passed as they are.
;; counter_add's amount is the third and fourth arguments as one i64. The
;; host must answer every call, never trap, and keep its counters bounded.
;; It declares KeepsState with reserve, unreserve and permit (and filter).
(module
  (import "wasmsched" "cycle_state_get" (func $state (param i32 i32) (result i32)))
  (import "wasmsched" "counter_add" (func $add (param i32 i32 i64) (result i64)))
  (import "wasmsched" "counter_get" (func $get (param i32 i32) (result i64)))
  (import "wasmsched" "permit_waiting" (func $waiting (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "permit_allow" (func $allow (param i32 i32) (result i32)))
  (import "wasmsched" "permit_reject" (func $reject (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "abi_version") (result i32) (i32.const 4))
  (func (export "capabilities") (result i32) (i32.const 0x40003802))
  (func (export "filter") (param i64))
  (func $run
    (local $n i32) (local $i i32) (local $p i32) (local $a i32) (local $b i32) (local $c i32) (local $d i32)
    (local.set $n (call $state (i32.const 0) (i32.const 160)))
    (if (i32.gt_s (local.get $n) (i32.const 160)) (then (local.set $n (i32.const 160))))
    (block $done
      (loop $next
        (local.set $p (i32.mul (local.get $i) (i32.const 20)))
        (br_if $done (i32.gt_s (i32.add (local.get $p) (i32.const 20)) (local.get $n)))
        (local.set $a (i32.load (i32.add (local.get $p) (i32.const 4))))
        (local.set $b (i32.load (i32.add (local.get $p) (i32.const 8))))
        (local.set $c (i32.load (i32.add (local.get $p) (i32.const 12))))
        (local.set $d (i32.load (i32.add (local.get $p) (i32.const 16))))
        (block $b5 (block $b4 (block $b3 (block $b2 (block $b1 (block $b0
          (br_table $b0 $b1 $b2 $b3 $b4 $b5
            (i32.rem_u (i32.load8_u (local.get $p)) (i32.const 5))))
          (drop (call $add (local.get $a) (local.get $b) (i64.load (i32.add (local.get $p) (i32.const 12))))) (br $b5))
          (drop (call $get (local.get $a) (local.get $b))) (br $b5))
          (drop (call $waiting (local.get $a) (local.get $b) (local.get $c) (local.get $d))) (br $b5))
          (drop (call $allow (local.get $a) (local.get $b))) (br $b5))
          (drop (call $reject (local.get $a) (local.get $b) (local.get $c) (local.get $d))) (br $b5))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $next (i32.lt_u (local.get $i) (i32.const 8))))))
  (func (export "reserve") (param i64) (call $run))
  (func (export "unreserve") (param i64) (call $run))
  (func (export "permit") (param i64) (result i64) (call $run) (i64.const 0)))
