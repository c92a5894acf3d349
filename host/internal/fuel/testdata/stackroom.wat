;; wat2wasm: --enable-tail-call
;; The stack check's room must come back whole however a function that
;; calls is left: falling off its end, return, a branch to its own label
;; (br, br_if, br_table), a tail call, and with two results.
(module
  (type $two (func (result i32 i64)))
  (func $leaf (param i32) (result i32) (local.get 0))
  ;; Plain recursion n deep.
  (func $down (export "down") (param $n i32) (result i32)
    (if (i32.eqz (local.get $n)) (then (return (i32.const 0))))
    (i32.add (call $down (i32.sub (local.get $n) (i32.const 1))) (call $leaf (i32.const 1))))
  ;; Recursion n deep that leaves each frame a way chosen by n % 4.
  (func $ways (export "ways") (param $n i32) (result i32)
    (if (i32.eqz (local.get $n)) (then (return (i32.const 0))))
    (block $a
      (block $b
        (block $c
          (block $d
            (br_table $a $b $c $d (i32.rem_u (local.get $n) (i32.const 4))))
          ;; 3: a br_table whose chosen label is the function's
          (block $x (result i32)
            (br_table $x 4 (i32.add (call $ways (i32.sub (local.get $n) (i32.const 1))) (i32.const 1)) (i32.const 1)))
          (return))
        ;; 2: br_if to the function's label
        (br_if 2 (i32.add (call $ways (i32.sub (local.get $n) (i32.const 1))) (i32.const 1)) (i32.const 1))
        (unreachable))
      ;; 1: br to the function's label
      (br 1 (i32.add (call $ways (i32.sub (local.get $n) (i32.const 1))) (i32.const 1))))
    ;; 0: return
    (return (i32.add (call $ways (i32.sub (local.get $n) (i32.const 1))) (i32.const 1))))
  ;; Tail recursion n deep: never deeper than one frame.
  (func $tail (export "tail") (param $n i32) (param $acc i32) (result i32)
    (if (i32.eqz (local.get $n)) (then (return (local.get $acc))))
    (return_call $tail (i32.sub (local.get $n) (i32.const 1)) (i32.add (local.get $acc) (call $leaf (i32.const 1)))))
  ;; Two results, fallen off the end.
  (func $pair (type $two)
    (drop (call $leaf (i32.const 1)))
    (i32.const 1) (i64.const 2))
  (func $pairs (export "pairs") (param $n i32) (result i32)
    (local $s i32)
    (loop $l
      call $pair
      drop
      local.get $s
      i32.add
      local.set $s
      (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
    (local.get $s))
)
