;; table.grow by a huge count, and by small steps until it fails: neither
;; may allocate host memory past the growth the host allows (the rewriter
;; lowers the table's maximum). filter traps (unreachable) when a grow that
;; must fail succeeds, or when the table ends larger than the host allows;
;; it returns normally otherwise (TestTableGrowthIsBounded).
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    ;; 2^30 entries at once (8 GiB of host memory in wazero): must fail.
    (if (i32.ne (table.grow $t (ref.null func) (i32.const 1073741824)) (i32.const -1))
      (then unreachable))
    ;; 4096 at a time until refused.
    (loop $again
      (br_if $again (i32.ne (table.grow $t (ref.null func) (i32.const 4096)) (i32.const -1))))
    (if (i32.gt_u (table.size $t) (i32.const 65537)) (then unreachable))))
