;; spin counts its argument down to zero in a tight loop: a guest that
;; stays in native code for as long as the caller asks, with no host call.
(module
  (func (export "spin") (param $n i64)
    (loop $again
      (local.set $n (i64.sub (local.get $n) (i64.const 1)))
      (br_if $again (i64.ne (local.get $n) (i64.const 0))))))
