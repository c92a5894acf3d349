;; team-isolation, hand-written in WebAssembly text: a wasmsched Filter policy
;; that keeps each team's pods on that team's nodes. Same policy, verdicts and
;; reasons as ../team-isolation/main.go (Go SDK) and ../team-isolation-c/.
;;
;; Config: "key=<label key>" (default "team"), parsed like sdk.ParseConfig.
;;   - A pod with the label runs only on nodes whose label has the same value.
;;   - A pod without the label runs only on nodes without it (the shared pool).
;;
;; Read it top to bottom to learn the guest ABI (docs/abi.md, version 1):
;;   1. imports: host functions of module "wasmsched" (§4)
;;   2. memory: constants, buffers, and the buffer protocol (§4)
;;   3. strings: a byte-loop compare, and white space for the config parser
;;   4. the config parse (sdk.ParseConfig's rules)
;;   5. the per-cycle cache (§3: `cycle`)
;;   6. reasons and set_status (§3, §4.1)
;;   7. exports: abi_version, capabilities, filter, filter_nodes (§1, §3, §3.1)
;;
;; Build: wat2wasm team_isolation.wat -o team-isolation.wasm (see README.md).

(module
  ;; ===== 1. Imports ========================================================
  ;; Only functions of module "wasmsched", with exactly the signatures of
  ;; docs/abi.md §4; any other import (WASI included) is refused at load, and
  ;; this guest needs none. All pointers and lengths are i32 offsets into the
  ;; memory exported below.

  ;; set_status(code, reason_ptr, reason_len): the call's verdict. Not calling
  ;; it means Success, so a node that passes costs no call at all.
  (import "wasmsched" "set_status" (func $set_status (param $code i32) (param $reason_ptr i32) (param $reason_len i32)))
  ;; config(buf, cap) -> n: the policy's config string.
  (import "wasmsched" "config" (func $config (param $buf i32) (param $cap i32) (result i32)))
  ;; pod_label / node_label(key_ptr, key_len, buf, cap) -> n, or -1 if unset.
  (import "wasmsched" "pod_label" (func $pod_label (param $key_ptr i32) (param $key_len i32) (param $buf i32) (param $cap i32) (result i32)))
  (import "wasmsched" "node_label" (func $node_label (param $key_ptr i32) (param $key_len i32) (param $buf i32) (param $cap i32) (result i32)))
  ;; select_node(i) -> 0: in filter_nodes, makes node i current.
  (import "wasmsched" "select_node" (func $select_node (param $i i32) (result i32)))

  ;; ===== 2. Memory =========================================================
  ;; One 64 KiB page to start; it grows only if a value does not fit a buffer
  ;; (section $reserve). The host caps growth at the policy's memoryLimit.
  ;;
  ;;   0    "team"                 4 bytes   the default key
  ;;   4    "key"                  3         the config key we look for
  ;;   16   " label mismatch"      15
  ;;   32   "node has no "         12
  ;;   48   " label (shared pool), pod belongs to "   37
  ;;   96   "node is dedicated to "  21
  ;;   128  "out of memory"        13
  ;;   144  " "                    1
  ;;   256  buffer descriptors: 8 bytes each, {ptr i32, cap i32}
  ;;        256 config, 264 pod value, 272 node value,
  ;;        280 mismatch reason, 288 shared-pool reason, 296 dedicated reason
  ;;   1024 ... 7168  the buffers' initial storage
  (memory (export "memory") 1)

  (data (i32.const 0) "team")
  (data (i32.const 4) "key")
  (data (i32.const 16) " label mismatch")
  (data (i32.const 32) "node has no ")
  (data (i32.const 48) " label (shared pool), pod belongs to ")
  (data (i32.const 96) "node is dedicated to ")
  (data (i32.const 128) "out of memory")
  (data (i32.const 144) " ")

  ;; The descriptors, little-endian. Label values are at most 63 bytes in
  ;; Kubernetes, so 64 bytes hold every real value in one host call; a config
  ;; is a few dozen bytes; a reason holds the key twice (a label key is at
  ;; most 317 bytes) and a value: under 1024. Anything longer (the host does
  ;; not re-validate objects) takes the slow path of $read.
  (data (i32.const 256)
    "\00\04\00\00" "\00\04\00\00"   ;; config:    ptr 1024, cap 1024
    "\00\08\00\00" "\40\00\00\00"   ;; pod:       ptr 2048, cap 64
    "\40\08\00\00" "\40\00\00\00"   ;; node:      ptr 2112, cap 64
    "\00\10\00\00" "\00\04\00\00"   ;; mismatch:  ptr 4096, cap 1024
    "\00\14\00\00" "\00\04\00\00"   ;; shared:    ptr 5120, cap 1024
    "\00\18\00\00" "\00\04\00\00")  ;; dedicated: ptr 6144, cap 1024

  ;; $reserve makes the buffer of descriptor $desc hold at least $n bytes,
  ;; keeping its contents. There is no allocator: memory.grow returns the old
  ;; size in pages, so the new pages start at old * 65536 and are ours. The
  ;; old buffer is abandoned; sizes at least double, which bounds the waste.
  ;; Returns 0 if memory cannot grow (memory.grow gives -1).
  (func $reserve (param $desc i32) (param $n i32) (result i32)
    (local $cap i32) (local $want i32) (local $pages i32) (local $old i32) (local $p i32)
    (local.set $cap (i32.load offset=4 (local.get $desc)))
    (if (i32.le_u (local.get $n) (local.get $cap))
      (then (return (i32.const 1))))
    ;; want = max(2 * cap, n), rounded up to whole pages
    (local.set $want (i32.shl (local.get $cap) (i32.const 1)))
    (if (i32.lt_u (local.get $want) (local.get $n))
      (then (local.set $want (local.get $n))))
    (local.set $pages (i32.shr_u (i32.add (local.get $want) (i32.const 65535)) (i32.const 16)))
    (local.set $old (memory.grow (local.get $pages)))
    (if (i32.eq (local.get $old) (i32.const -1))
      (then (return (i32.const 0))))
    (local.set $p (i32.shl (local.get $old) (i32.const 16)))
    ;; memory.copy (bulk memory, part of WebAssembly 2.0 which the host enables)
    (memory.copy (local.get $p) (i32.load (local.get $desc)) (local.get $cap))
    (i32.store (local.get $desc) (local.get $p))
    (i32.store offset=4 (local.get $desc) (i32.shl (local.get $pages) (i32.const 16)))
    (i32.const 1))

  ;; $host_read calls one host read function into the buffer of $desc.
  ;; $src: 0 config, 1 pod_label, 2 node_label.
  (func $host_read (param $src i32) (param $key i32) (param $key_len i32) (param $desc i32) (result i32)
    (local $buf i32) (local $cap i32)
    (local.set $buf (i32.load (local.get $desc)))
    (local.set $cap (i32.load offset=4 (local.get $desc)))
    (if (i32.eqz (local.get $src))
      (then (return (call $config (local.get $buf) (local.get $cap)))))
    (if (i32.eq (local.get $src) (i32.const 1))
      (then (return (call $pod_label (local.get $key) (local.get $key_len) (local.get $buf) (local.get $cap)))))
    (call $node_label (local.get $key) (local.get $key_len) (local.get $buf) (local.get $cap)))

  ;; $read: the buffer protocol of §4. The host returns the value's full
  ;; length n and writes the value only if n <= cap; if it did not fit, grow
  ;; the buffer and ask again. Returns the length (the value is at the
  ;; descriptor's ptr), -1 if unset, or -1000 if memory ran out. Like the Go
  ;; SDK, every negative answer counts as unset: with valid pointers, inside
  ;; filter, -2 (BadArgs) and -3 (NotAvailable) do not happen.
  (func $read (param $src i32) (param $key i32) (param $key_len i32) (param $desc i32) (result i32)
    (local $n i32)
    (local.set $n (call $host_read (local.get $src) (local.get $key) (local.get $key_len) (local.get $desc)))
    ;; n > cap, compared unsigned only when n >= 0 (negatives are answers, not lengths)
    (if (i32.and (i32.ge_s (local.get $n) (i32.const 0))
                 (i32.gt_u (local.get $n) (i32.load offset=4 (local.get $desc))))
      (then
        (if (i32.eqz (call $reserve (local.get $desc) (local.get $n)))
          (then (return (i32.const -1000))))
        (local.set $n (call $host_read (local.get $src) (local.get $key) (local.get $key_len) (local.get $desc)))
        ;; cannot happen (the value changed between the two calls): unset
        (if (i32.and (i32.ge_s (local.get $n) (i32.const 0))
                     (i32.gt_u (local.get $n) (i32.load offset=4 (local.get $desc))))
          (then (local.set $n (i32.const -1))))))
    (select (i32.const -1) (local.get $n) (i32.lt_s (local.get $n) (i32.const 0))))

  ;; ===== 3. Strings ========================================================

  ;; $equal compares two byte strings with a byte loop. (A label value is at
  ;; most 63 bytes. The host checks its deadline on every loop back-edge, so a
  ;; hot compare of long strings would rather load 8 bytes per iteration, as
  ;; the C version does.)
  (func $equal (param $a i32) (param $a_len i32) (param $b i32) (param $b_len i32) (result i32)
    (local $i i32)
    (if (i32.ne (local.get $a_len) (local.get $b_len))
      (then (return (i32.const 0))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $a_len)))
        (if (i32.ne (i32.load8_u (i32.add (local.get $a) (local.get $i)))
                    (i32.load8_u (i32.add (local.get $b) (local.get $i))))
          (then (return (i32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 1))

  ;; $space_at returns the length of the white space character starting at
  ;; $p ($p < $end), or 0. White space is Go's unicode.IsSpace, as
  ;; strings.TrimSpace uses it: ASCII \t \n \v \f \r and space, and the UTF-8
  ;; encodings of U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
  ;; U+202F, U+205F and U+3000.
  (func $space_at (param $p i32) (param $end i32) (result i32)
    (local $n i32) (local $c i32) (local $c1 i32) (local $c2 i32)
    (local.set $n (i32.sub (local.get $end) (local.get $p)))
    (local.set $c (i32.load8_u (local.get $p)))
    ;; ' ', or 9..13 (c - 9 <= 4 unsigned)
    (if (i32.or (i32.eq (local.get $c) (i32.const 0x20))
                (i32.le_u (i32.sub (local.get $c) (i32.const 9)) (i32.const 4)))
      (then (return (i32.const 1))))
    (if (i32.lt_u (local.get $n) (i32.const 2))
      (then (return (i32.const 0))))
    (local.set $c1 (i32.load8_u offset=1 (local.get $p)))
    (if (i32.eq (local.get $c) (i32.const 0xC2))              ;; U+0085, U+00A0
      (then (return (select (i32.const 2) (i32.const 0)
                      (i32.or (i32.eq (local.get $c1) (i32.const 0x85))
                              (i32.eq (local.get $c1) (i32.const 0xA0)))))))
    (if (i32.lt_u (local.get $n) (i32.const 3))
      (then (return (i32.const 0))))
    (local.set $c2 (i32.load8_u offset=2 (local.get $p)))
    (if (i32.eq (local.get $c) (i32.const 0xE1))              ;; U+1680
      (then (return (select (i32.const 3) (i32.const 0)
                      (i32.and (i32.eq (local.get $c1) (i32.const 0x9A))
                               (i32.eq (local.get $c2) (i32.const 0x80)))))))
    (if (i32.eq (local.get $c) (i32.const 0xE2))
      (then
        (if (i32.eq (local.get $c1) (i32.const 0x80))         ;; U+2000..200A, 2028, 2029, 202F
          (then (return (select (i32.const 3) (i32.const 0)
                          (i32.or (i32.le_u (i32.sub (local.get $c2) (i32.const 0x80)) (i32.const 0x0A))
                                  (i32.or (i32.eq (local.get $c2) (i32.const 0xA8))
                                          (i32.or (i32.eq (local.get $c2) (i32.const 0xA9))
                                                  (i32.eq (local.get $c2) (i32.const 0xAF)))))))))
        (return (select (i32.const 3) (i32.const 0)           ;; U+205F
                  (i32.and (i32.eq (local.get $c1) (i32.const 0x81))
                           (i32.eq (local.get $c2) (i32.const 0x9F)))))))
    (select (i32.const 3) (i32.const 0)                       ;; U+3000
      (i32.and (i32.eq (local.get $c) (i32.const 0xE3))
               (i32.and (i32.eq (local.get $c1) (i32.const 0x80))
                        (i32.eq (local.get $c2) (i32.const 0x80))))))

  ;; $space_before: the same for the character ending at $end ($start < $end):
  ;; a white space encoding of 1, 2 or 3 bytes that ends exactly at $end.
  (func $space_before (param $start i32) (param $end i32) (result i32)
    (local $n i32)
    (local.set $n (i32.const 1))
    (block $done
      (loop $next
        (br_if $done (i32.gt_u (local.get $n) (i32.const 3)))
        (br_if $done (i32.gt_u (local.get $n) (i32.sub (local.get $end) (local.get $start))))
        (if (i32.eq (call $space_at (i32.sub (local.get $end) (local.get $n)) (local.get $end)) (local.get $n))
          (then (return (local.get $n))))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $next)))
    (i32.const 0))

  ;; $trim narrows [$s, $e) like strings.TrimSpace. It returns two values
  ;; (multi-value, WebAssembly 2.0): the caller pops them in reverse order.
  (func $trim (param $s i32) (param $e i32) (result i32 i32)
    (local $n i32)
    (block $left_done
      (loop $left
        (br_if $left_done (i32.ge_u (local.get $s) (local.get $e)))
        (local.set $n (call $space_at (local.get $s) (local.get $e)))
        (br_if $left_done (i32.eqz (local.get $n)))
        (local.set $s (i32.add (local.get $s) (local.get $n)))
        (br $left)))
    (block $right_done
      (loop $right
        (br_if $right_done (i32.ge_u (local.get $s) (local.get $e)))
        (local.set $n (call $space_before (local.get $s) (local.get $e)))
        (br_if $right_done (i32.eqz (local.get $n)))
        (local.set $e (i32.sub (local.get $e) (local.get $n)))
        (br $right)))
    (local.get $s)
    (local.get $e))

  ;; ===== 4. The config =====================================================
  ;; sdk.ParseConfig's rules: fields separated by "," or "\n" (empty ones
  ;; dropped), each trimmed; an empty field or one starting with "#" is
  ;; skipped; "k=v" splits at the first "=", both sides trimmed; a bare word
  ;; maps to "". A later "key" wins. main.go then uses "team" when the value
  ;; is missing or empty.

  ;; The label key, in the config buffer or at 0 ("team").
  (global $key_ptr (mut i32) (i32.const 0))
  (global $key_len (mut i32) (i32.const 4))

  ;; $config_key sets $key_ptr/$key_len from the config [$s, $s+$n).
  (func $config_key (param $s i32) (param $n i32)
    (local $p i32) (local $end i32) (local $c i32)
    (local $line i32) (local $line_end i32) (local $eq i32)
    (local $k i32) (local $k_end i32) (local $v i32) (local $v_end i32)
    (global.set $key_ptr (i32.const 0))
    (global.set $key_len (i32.const 4))
    (local.set $p (local.get $s))
    (local.set $end (i32.add (local.get $s) (local.get $n)))
    (block $fields_done
      (loop $field
        (br_if $fields_done (i32.ge_u (local.get $p) (local.get $end)))
        ;; the field runs from $p to the next "," (44) or "\n" (10)
        (local.set $line (local.get $p))
        (block $at_separator
          (loop $scan
            (br_if $at_separator (i32.ge_u (local.get $p) (local.get $end)))
            (local.set $c (i32.load8_u (local.get $p)))
            (br_if $at_separator (i32.or (i32.eq (local.get $c) (i32.const 44))
                                         (i32.eq (local.get $c) (i32.const 10))))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $scan)))
        (local.set $line_end (local.get $p))
        (if (i32.lt_u (local.get $p) (local.get $end))
          (then (local.set $p (i32.add (local.get $p) (i32.const 1)))))  ;; past the separator
        (call $trim (local.get $line) (local.get $line_end))
        (local.set $line_end)
        (local.set $line)
        ;; empty, or a comment ("#" is 35): next field
        (br_if $field (i32.eq (local.get $line) (local.get $line_end)))
        (br_if $field (i32.eq (i32.load8_u (local.get $line)) (i32.const 35)))
        ;; the first "=" (61), or the end of the field
        (local.set $eq (local.get $line))
        (block $found
          (loop $scan_eq
            (br_if $found (i32.ge_u (local.get $eq) (local.get $line_end)))
            (br_if $found (i32.eq (i32.load8_u (local.get $eq)) (i32.const 61)))
            (local.set $eq (i32.add (local.get $eq) (i32.const 1)))
            (br $scan_eq)))
        (call $trim (local.get $line) (local.get $eq))
        (local.set $k_end)
        (local.set $k)
        ;; the value starts after "=", or is empty for a bare word
        (call $trim (select (i32.add (local.get $eq) (i32.const 1)) (local.get $line_end)
                            (i32.lt_u (local.get $eq) (local.get $line_end)))
                    (local.get $line_end))
        (local.set $v_end)
        (local.set $v)
        (if (call $equal (local.get $k) (i32.sub (local.get $k_end) (local.get $k)) (i32.const 4) (i32.const 3))  ;; "key"
          (then
            (if (i32.lt_u (local.get $v) (local.get $v_end))
              (then
                (global.set $key_ptr (local.get $v))
                (global.set $key_len (i32.sub (local.get $v_end) (local.get $v))))
              (else  ;; "key=" or a bare "key": the default again
                (global.set $key_ptr (i32.const 0))
                (global.set $key_len (i32.const 4))))))
        (br $field))))

  ;; ===== 5. The per-cycle cache ============================================
  ;; An instance serves many calls, of different pods and cycles (§2).
  ;; `cycle` is the same for all calls about one pod in one cycle and never 0
  ;; (§3), so 0 means "nothing cached". The config, the key, the pod's label
  ;; and the two reasons that depend only on them are kept for the cycle.
  (global $cached_cycle (mut i64) (i64.const 0))
  (global $pod_len (mut i32) (i32.const -1))            ;; -1: the pod has no such label
  (global $mismatch_len (mut i32) (i32.const 0))        ;; reasons: 0 = not built this cycle
  (global $shared_len (mut i32) (i32.const 0))
  (global $dedicated_prefix_len (mut i32) (i32.const 0))

  ;; $begin loads the cache for $cycle; 0 if memory ran out.
  (func $begin (param $cycle i64) (result i32)
    (local $n i32)
    (if (i64.eq (local.get $cycle) (global.get $cached_cycle))
      (then (return (i32.const 1))))
    (local.set $n (call $read (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 256)))
    (if (i32.eq (local.get $n) (i32.const -1000))
      (then (return (i32.const 0))))
    ;; an unset config (-1) is the empty string
    (call $config_key (i32.load (i32.const 256))
                      (select (i32.const 0) (local.get $n) (i32.lt_s (local.get $n) (i32.const 0))))
    (global.set $pod_len (call $read (i32.const 1) (global.get $key_ptr) (global.get $key_len) (i32.const 264)))
    (if (i32.eq (global.get $pod_len) (i32.const -1000))
      (then (return (i32.const 0))))
    (global.set $mismatch_len (i32.const 0))
    (global.set $shared_len (i32.const 0))
    (global.set $dedicated_prefix_len (i32.const 0))
    (global.set $cached_cycle (local.get $cycle))
    (i32.const 1))

  ;; ===== 6. Reasons ========================================================
  ;; Reasons are built in memory and passed to set_status as (ptr, len). The
  ;; host copies the reason during the call, so a buffer can be reused at once.

  ;; $put copies $n bytes to $dst and returns $dst + $n.
  (func $put (param $dst i32) (param $src i32) (param $n i32) (result i32)
    (memory.copy (local.get $dst) (local.get $src) (local.get $n))
    (i32.add (local.get $dst) (local.get $n)))

  ;; "<k> label mismatch", once per cycle; 0 if memory ran out.
  (func $build_mismatch (result i32)
    (local $n i32)
    (if (global.get $mismatch_len)
      (then (return (i32.const 1))))
    (local.set $n (i32.add (global.get $key_len) (i32.const 15)))
    (if (i32.eqz (call $reserve (i32.const 280) (local.get $n)))
      (then (return (i32.const 0))))
    (drop (call $put
      (call $put (i32.load (i32.const 280)) (global.get $key_ptr) (global.get $key_len))
      (i32.const 16) (i32.const 15)))
    (global.set $mismatch_len (local.get $n))
    (i32.const 1))

  ;; "node has no <k> label (shared pool), pod belongs to <k> <podTeam>",
  ;; once per cycle.
  (func $build_shared (result i32)
    (local $n i32) (local $p i32)
    (if (global.get $shared_len)
      (then (return (i32.const 1))))
    ;; 12 + k + 37 + k + 1 + podTeam
    (local.set $n (i32.add (i32.add (i32.const 50) (global.get $pod_len))
                           (i32.shl (global.get $key_len) (i32.const 1))))
    (if (i32.eqz (call $reserve (i32.const 288) (local.get $n)))
      (then (return (i32.const 0))))
    (local.set $p (i32.load (i32.const 288)))
    (local.set $p (call $put (local.get $p) (i32.const 32) (i32.const 12)))    ;; "node has no "
    (local.set $p (call $put (local.get $p) (global.get $key_ptr) (global.get $key_len)))
    (local.set $p (call $put (local.get $p) (i32.const 48) (i32.const 37)))    ;; " label (shared pool), pod belongs to "
    (local.set $p (call $put (local.get $p) (global.get $key_ptr) (global.get $key_len)))
    (local.set $p (call $put (local.get $p) (i32.const 144) (i32.const 1)))    ;; " "
    (drop (call $put (local.get $p) (i32.load (i32.const 264)) (global.get $pod_len)))
    (global.set $shared_len (local.get $n))
    (i32.const 1))

  ;; "node is dedicated to <k> <nodeTeam>": the prefix once per cycle, then
  ;; the node's value (in the node buffer, $team_len bytes) after it.
  (func $build_dedicated (param $team_len i32) (result i32)
    (local $p i32)
    (if (i32.eqz (global.get $dedicated_prefix_len))
      (then
        (if (i32.eqz (call $reserve (i32.const 296) (i32.add (global.get $key_len) (i32.const 22))))
          (then (return (i32.const 0))))
        (local.set $p (call $put (i32.load (i32.const 296)) (i32.const 96) (i32.const 21)))  ;; "node is dedicated to "
        (local.set $p (call $put (local.get $p) (global.get $key_ptr) (global.get $key_len)))
        (drop (call $put (local.get $p) (i32.const 144) (i32.const 1)))                      ;; " "
        (global.set $dedicated_prefix_len (i32.add (global.get $key_len) (i32.const 22)))))
    (if (i32.eqz (call $reserve (i32.const 296) (i32.add (global.get $dedicated_prefix_len) (local.get $team_len))))
      (then (return (i32.const 0))))
    (drop (call $put (i32.add (i32.load (i32.const 296)) (global.get $dedicated_prefix_len))
                     (i32.load (i32.const 272)) (local.get $team_len)))
    (i32.const 1))

  ;; $evaluate decides the current node, as main.go's filter does. Status
  ;; codes: 1 Error, 2 Unschedulable (§3).
  (func $evaluate (param $cycle i64)
    (local $node_len i32) (local $ok i32)
    (if (i32.eqz (call $begin (local.get $cycle)))
      (then
        (call $set_status (i32.const 1) (i32.const 128) (i32.const 13))  ;; "out of memory"
        (return)))
    (local.set $node_len (call $read (i32.const 2) (global.get $key_ptr) (global.get $key_len) (i32.const 272)))
    (local.set $ok (i32.const 1))
    (if (i32.eq (local.get $node_len) (i32.const -1000))
      (then (local.set $ok (i32.const 0)))
      (else
        (if (i32.ne (global.get $pod_len) (i32.const -1))
          (then  ;; the pod belongs to a team
            (if (i32.eq (local.get $node_len) (i32.const -1))
              (then  ;; shared node
                (local.set $ok (call $build_shared))
                (if (local.get $ok)
                  (then (call $set_status (i32.const 2) (i32.load (i32.const 288)) (global.get $shared_len)))))
              (else
                (if (i32.eqz (call $equal (i32.load (i32.const 272)) (local.get $node_len)
                                          (i32.load (i32.const 264)) (global.get $pod_len)))
                  (then  ;; another team's node
                    (local.set $ok (call $build_mismatch))
                    (if (local.get $ok)
                      (then (call $set_status (i32.const 2) (i32.load (i32.const 280)) (global.get $mismatch_len)))))))))
          (else  ;; the pod belongs to the shared pool
            (if (i32.ne (local.get $node_len) (i32.const -1))
              (then  ;; a team's node
                (local.set $ok (call $build_dedicated (local.get $node_len)))
                (if (local.get $ok)
                  (then (call $set_status (i32.const 2) (i32.load (i32.const 296))
                                          (i32.add (global.get $dedicated_prefix_len) (local.get $node_len)))))))))))
    (if (i32.eqz (local.get $ok))
      (then (call $set_status (i32.const 1) (i32.const 128) (i32.const 13)))))  ;; "out of memory"

  ;; ===== 7. Exports ========================================================

  ;; Required: the ABI version.
  (func (export "abi_version") (result i32)
    (i32.const 1))

  ;; The entry points implemented: filter (2) | filter_nodes (32).
  (func (export "capabilities") (result i32)
    (i32.const 34))

  ;; filter(cycle): one node, already current. Returning without set_status
  ;; admits it.
  (func (export "filter") (param $cycle i64)
    (call $evaluate (local.get $cycle)))

  ;; filter_nodes(cycle, n): n nodes in one call (§3.1). select_node(i) makes
  ;; node i current for node_label and set_status and starts its deadline;
  ;; the node is then evaluated exactly as filter does.
  (func (export "filter_nodes") (param $cycle i64) (param $n i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_s (local.get $i) (local.get $n)))
        ;; non-zero (-2): not a batch, or i out of range; cannot happen for i < n
        (br_if $done (call $select_node (local.get $i)))
        (call $evaluate (local.get $cycle))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))
)
