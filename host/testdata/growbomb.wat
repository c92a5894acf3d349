;; Filter grows memory 16 pages at a time until memory.grow fails, then
;; returns normally: the memory limit must hold and the host must recycle
;; the bloated instance. Score traps once growth fails.
(module
  (memory (export "memory") 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "filter") (param i64)
    (block $done
      (loop $grow
        (br_if $done (i32.eq (memory.grow (i32.const 16)) (i32.const -1)))
        (br $grow))))
  (func (export "score") (param i64) (result i64)
    (loop $grow
      (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable))
