;; Pins the ABI's answers to the questions docs/abi.md §3 and §3.1 settle
;; (host.TestABISemantics). The first byte of the policy's config picks what
;; the guest does:
;;   u  filter_nodes selects node 0 only and returns
;;   w  filter_nodes calls set_status before any select_node, then selects
;;      every node and rejects node 1 with its own reason
;;   r  filter and filter_nodes call set_status and then overwrite the reason
;;      buffer before returning
;;   s  score_nodes checks the -2 answers of select_node(n) and scores_set
;;      with a wrong count, that scores_get counts n, rejects node 1, and
;;      reports score 10*i for node i
;;   n  score_nodes selects every node and never calls scores_set
;;   c  score returns its cycle argument; score_nodes reports it for each node
;;   k  score returns pod_annotation("big") into a 256 KiB buffer
;;   l  score returns pod_label for a 70000-byte key
;;   p  score returns pod_annotation("big") with cap 0 and a buffer
;;      pointer past the end of memory: a size probe
;;   a  score returns node_resource(allocatable, "cpu")
;;   m  score returns the length of node_list(allocatable) written at 8192
;;   d  score returns pod_object(JSON) with cap 0 (its length)
;;   e  score returns node_list(NodePods) with cap 0, twice (their sum)
;;   z  normalize_score sets each score to the length of its scored node's
;;      name (select_node(i), node_string), after checking that
;;      select_node(n) answers -2
;;   f  prefilter names nodes "a" and "c" (prefilter_nodes), after checking
;;      that a malformed list answers -2; filter checks that prefilter_nodes
;;      answers -3 there
;;   x  score stores 16 bytes of cycle state, then tries 1 MiB + 1, and
;;      returns the length cycle_state_get reports
;;   y  the same with exactly 1 MiB
;; It also exports what C and Rust toolchains add (__heap_base, __data_end,
;; __indirect_function_table) and a function outside the ABI.
(module
  (import "wasmsched" "config" (func $config (param i32 i32) (result i32)))
  (import "wasmsched" "set_status" (func $set_status (param i32 i32 i32)))
  (import "wasmsched" "select_node" (func $select (param i32) (result i32)))
  (import "wasmsched" "scores_set" (func $scores_set (param i32 i32) (result i32)))
  (import "wasmsched" "scores_get" (func $scores_get (param i32 i32) (result i32)))
  (import "wasmsched" "pod_label" (func $pod_label (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "pod_annotation" (func $pod_annotation (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "cycle_state_set" (func $state_set (param i32 i32)))
  (import "wasmsched" "cycle_state_get" (func $state_get (param i32 i32) (result i32)))
  (import "wasmsched" "node_resource" (func $node_resource (param i32 i32 i32) (result i64)))
  (import "wasmsched" "node_list" (func $node_list (param i32 i32 i32) (result i32)))
  (import "wasmsched" "pod_object" (func $pod_object (param i32 i32 i32) (result i32)))
  (import "wasmsched" "node_string" (func $node_string (param i32 i32 i32) (result i32)))
  (import "wasmsched" "prefilter_nodes" (func $prefilter_nodes (param i32 i32) (result i32)))
  (memory (export "memory") 20)
  (table (export "__indirect_function_table") 1 funcref)
  (global (export "__heap_base") i32 (i32.const 327680))
  (global (export "__data_end") i32 (i32.const 64))
  (data (i32.const 0) "whole batch")
  (data (i32.const 16) "node one")
  (data (i32.const 48) "n1")
  (data (i32.const 56) "big")
  (data (i32.const 60) "cpu")
  (data (i32.const 200) "\02\00\00\00\01\00\00\00a\01\00\00\00c")
  (data (i32.const 220) "\05\00\00\00")

  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "helper") (result i32) (i32.const 7))

  ;; mode: the first byte of the config, or 0 if there is none.
  (func $mode (result i32)
    (if (i32.le_s (call $config (i32.const 1024) (i32.const 64)) (i32.const 0))
      (then (return (i32.const 0))))
    (i32.load8_u (i32.const 1024)))

  ;; reject_then_clobber: set_status(2, "first") from a buffer, then
  ;; overwrite the buffer with "XXXXX".
  (func $reject_then_clobber
    (i32.store (i32.const 32) (i32.const 0x73726966)) ;; "firs"
    (i32.store8 (i32.const 36) (i32.const 0x74))       ;; "t"
    (call $set_status (i32.const 2) (i32.const 32) (i32.const 5))
    (i32.store (i32.const 32) (i32.const 0x58585858))
    (i32.store8 (i32.const 36) (i32.const 0x58)))

  (func (export "filter") (param $cycle i64)
    (if (i32.eq (call $mode) (i32.const 0x66)) ;; f
      (then (if (i32.ne (call $prefilter_nodes (i32.const 200) (i32.const 14)) (i32.const -3)) (then unreachable))))
    (if (i32.eq (call $mode) (i32.const 0x72)) ;; r
      (then (call $reject_then_clobber))))

  (func (export "prefilter") (param $cycle i64)
    (if (i32.ne (call $mode) (i32.const 0x66)) (then (return))) ;; f
    (if (i32.ne (call $prefilter_nodes (i32.const 220) (i32.const 4)) (i32.const -2)) (then unreachable))
    (if (i32.ne (call $prefilter_nodes (i32.const 200) (i32.const 14)) (i32.const 0)) (then unreachable)))

  (func (export "filter_nodes") (param $cycle i64) (param $n i32)
    (local $m i32) (local $i i32)
    (local.set $m (call $mode))
    (if (i32.eq (local.get $m) (i32.const 0x75)) ;; u
      (then (drop (call $select (i32.const 0))) (return)))
    (if (i32.eq (local.get $m) (i32.const 0x77)) ;; w
      (then (call $set_status (i32.const 2) (i32.const 0) (i32.const 11))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (drop (call $select (local.get $i)))
        (if (i32.and (i32.eq (local.get $m) (i32.const 0x77)) (i32.eq (local.get $i) (i32.const 1)))
          (then (call $set_status (i32.const 3) (i32.const 16) (i32.const 8))))
        (if (i32.eq (local.get $m) (i32.const 0x72))
          (then (call $reject_then_clobber)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))

  (func (export "score") (param $cycle i64) (result i64)
    (local $m i32)
    (local.set $m (call $mode))
    (if (i32.eq (local.get $m) (i32.const 0x63)) ;; c
      (then (return (local.get $cycle))))
    (if (i32.eq (local.get $m) (i32.const 0x6b)) ;; k
      (then (return (i64.extend_i32_s
        (call $pod_annotation (i32.const 56) (i32.const 3) (i32.const 65536) (i32.const 262144))))))
    (if (i32.eq (local.get $m) (i32.const 0x6c)) ;; l
      (then (return (i64.extend_i32_s
        (call $pod_label (i32.const 65536) (i32.const 70000) (i32.const 0) (i32.const 0))))))
    (if (i32.eq (local.get $m) (i32.const 0x64)) ;; d
      (then (return (i64.extend_i32_s (call $pod_object (i32.const 0) (i32.const 0) (i32.const 0))))))
    (if (i32.eq (local.get $m) (i32.const 0x65)) ;; e
      (then (return (i64.extend_i32_s (i32.add
        (call $node_list (i32.const 9) (i32.const 0) (i32.const 0))
        (call $node_list (i32.const 9) (i32.const 0) (i32.const 0)))))))
    (if (i32.eq (local.get $m) (i32.const 0x61)) ;; a
      (then (return (call $node_resource (i32.const 0) (i32.const 60) (i32.const 3)))))
    (if (i32.eq (local.get $m) (i32.const 0x6d)) ;; m
      (then (return (i64.extend_i32_s (call $node_list (i32.const 3) (i32.const 8192) (i32.const 4096))))))
    (if (i32.eq (local.get $m) (i32.const 0x70)) ;; p
      (then (return (i64.extend_i32_s
        (call $pod_annotation (i32.const 56) (i32.const 3) (i32.const 0xfffffff0) (i32.const 0))))))
    (if (i32.or (i32.eq (local.get $m) (i32.const 0x78)) (i32.eq (local.get $m) (i32.const 0x79))) ;; x, y
      (then
        (call $state_set (i32.const 0) (i32.const 16))
        (call $state_set (i32.const 0)
          (select (i32.const 1048577) (i32.const 1048576) (i32.eq (local.get $m) (i32.const 0x78))))
        (return (i64.extend_i32_s (call $state_get (i32.const 0) (i32.const 0))))))
    (i64.const 0))

  (func (export "score_nodes") (param $cycle i64) (param $n i32)
    (local $m i32) (local $i i32)
    (local.set $m (call $mode))
    (if (i32.eq (local.get $m) (i32.const 0x73)) ;; s
      (then
        (if (i32.ne (call $select (local.get $n)) (i32.const -2)) (then unreachable))
        (if (i32.ne (call $scores_set (i32.const 2048) (i32.add (local.get $n) (i32.const 1))) (i32.const -2)) (then unreachable))
        (if (i32.ne (call $scores_get (i32.const 2048) (i32.const 0)) (local.get $n)) (then unreachable))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (drop (call $select (local.get $i)))
        (i64.store (i32.add (i32.const 2048) (i32.shl (local.get $i) (i32.const 3)))
          (select (local.get $cycle)
                  (i64.mul (i64.extend_i32_u (local.get $i)) (i64.const 10))
                  (i32.eq (local.get $m) (i32.const 0x63))))
        (if (i32.and (i32.eq (local.get $m) (i32.const 0x73)) (i32.eq (local.get $i) (i32.const 1)))
          (then (call $set_status (i32.const 2) (i32.const 48) (i32.const 2))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (if (i32.ne (local.get $m) (i32.const 0x6e)) ;; n: no scores_set
      (then
        (if (i32.ne (call $scores_set (i32.const 2048) (local.get $n)) (local.get $n)) (then unreachable)))))
  (func (export "normalize_score") (param $cycle i64) (param $n i32)
    (local $i i32)
    (if (i32.ne (call $mode) (i32.const 0x7a)) (then (return))) ;; z
    (if (i32.ne (call $select (local.get $n)) (i32.const -2)) (then unreachable))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (i32.ne (call $select (local.get $i)) (i32.const 0)) (then unreachable))
        (i64.store (i32.add (i32.const 2048) (i32.shl (local.get $i) (i32.const 3)))
          (i64.extend_i32_s (call $node_string (i32.const 0) (i32.const 4096) (i32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (drop (call $scores_set (i32.const 2048) (local.get $n)))))
