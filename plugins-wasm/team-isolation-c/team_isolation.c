/*
 * team-isolation, in C without a libc: a wasmsched Filter policy that keeps
 * each team's pods on that team's nodes. It is the same policy as
 * ../team-isolation/main.go (Go SDK) and gives the same verdicts and reasons
 * on every case of ../team-isolation/testdata.json; see README.md for the
 * build command and the flags.
 *
 * Config: "key=<label key>" (default "team"), parsed like the Go SDK's
 * sdk.ParseConfig.
 *   - A pod with the label runs only on nodes whose label has the same value.
 *   - A pod without the label runs only on nodes without the label (the
 *     shared pool).
 *
 * Everything here follows docs/abi.md (guest ABI version 1) and nothing else:
 * the module exports memory, abi_version, capabilities, filter and
 * filter_nodes, and imports five functions of module "wasmsched". It has no
 * WASI import, no libc, no malloc: buffers are static, and grow with
 * memory.grow in the rare case a value does not fit.
 */

typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned char u8;

/* ---- Host functions (docs/abi.md §4) ----------------------------------
 *
 * Each declaration names the wasm import: module "wasmsched", field
 * import_name. Pointers and u32 are i32 in wasm32, so these C prototypes
 * compile to exactly the ABI's wasm signatures. An import is only emitted
 * if the function is called. */
#define WASMSCHED(name) __attribute__((import_module("wasmsched"), import_name(name)))

/* (code i32, reason_ptr i32, reason_len i32) -> () */
WASMSCHED("set_status") void set_status(i32 code, const u8 *reason, u32 len);
/* (buf i32, cap i32) -> i32 */
WASMSCHED("config") i32 config(u8 *buf, u32 cap);
/* (key_ptr i32, key_len i32, buf i32, cap i32) -> i32 */
WASMSCHED("pod_label") i32 pod_label(const u8 *key, u32 key_len, u8 *buf, u32 cap);
/* (key_ptr i32, key_len i32, buf i32, cap i32) -> i32 */
WASMSCHED("node_label") i32 node_label(const u8 *key, u32 key_len, u8 *buf, u32 cap);
/* (i i32) -> i32 */
WASMSCHED("select_node") i32 select_node(i32 i);

/* Status codes (docs/abi.md §3). */
enum { CODE_ERROR = 1, CODE_UNSCHEDULABLE = 2 };

/* A string literal as (pointer, length), without its NUL. */
#define LIT(s) (const u8 *)(s), (u32)(sizeof(s) - 1)

/* ---- Buffers -----------------------------------------------------------
 *
 * The read functions follow one protocol (§4): the guest passes (buf, cap),
 * the host returns the value's full length n and writes it only if
 * n <= cap. Every buffer here starts as a static array sized for what
 * Kubernetes allows, so the common path never allocates; a longer value
 * (the host does not re-validate objects, and `wasmsched test` reads YAML
 * files) gets a bigger buffer and a second call. */
struct buf {
    u8 *p;
    u32 cap;
};

/* Label values are at most 63 bytes (Kubernetes validates them), so 64
 * bytes hold every value of a real cluster in one host call. */
static u8 pod_team_static[64], node_team_static[64];
/* A config string is a few dozen bytes. A reason holds the key twice (at
 * most 317 bytes each: a 253-byte prefix, "/" and a 63-byte name) and one
 * value (63): under 1024 bytes. */
static u8 config_static[1024], mismatch_static[1024], shared_static[1024], dedicated_static[1024];

static struct buf config_buf = {config_static, sizeof config_static};
static struct buf pod_team = {pod_team_static, sizeof pod_team_static};
static struct buf node_team = {node_team_static, sizeof node_team_static};
static struct buf mismatch = {mismatch_static, sizeof mismatch_static};
static struct buf shared = {shared_static, sizeof shared_static};
static struct buf dedicated = {dedicated_static, sizeof dedicated_static};

/* reserve makes b hold at least n bytes, keeping its contents. There is no
 * allocator: new memory comes from memory.grow, past everything the linker
 * placed, and the old buffer is simply abandoned. Buffers at least double,
 * so the waste stays below the largest buffer. Returns 0 when memory cannot
 * grow (past the policy's memoryLimit). */
static int reserve(struct buf *b, u32 n) {
    if (n <= b->cap) {
        return 1;
    }
    u32 cap = b->cap * 2 > n ? b->cap * 2 : n;
    u32 pages = (cap + 65535) / 65536;
    __SIZE_TYPE__ old = __builtin_wasm_memory_grow(0, pages);
    if (old == (__SIZE_TYPE__)-1) {
        return 0;
    }
    u8 *p = (u8 *)(old * 65536);
    __builtin_memcpy(p, b->p, b->cap); /* memory.copy, see README.md */
    b->p = p;
    b->cap = pages * 65536;
    return 1;
}

/* Results of the read helpers besides a length: the host's -1 (NotFound),
 * and NO_MEMORY, which no host function returns. */
#define UNSET (-1)
#define NO_MEMORY (-1000)

enum source { CONFIG, POD_LABEL, NODE_LABEL };

static i32 host_read(enum source s, const u8 *key, u32 key_len, struct buf *b) {
    switch (s) {
    case CONFIG:
        return config(b->p, b->cap);
    case POD_LABEL:
        return pod_label(key, key_len, b->p, b->cap);
    default:
        return node_label(key, key_len, b->p, b->cap);
    }
}

/* read fills b from a host read function and returns the value's length,
 * UNSET, or NO_MEMORY. Like the Go SDK, any negative answer counts as
 * "not set": with valid pointers and inside filter, -2 (BadArgs) and -3
 * (NotAvailable) cannot happen. */
static i32 read_value(enum source s, const u8 *key, u32 key_len, struct buf *b) {
    i32 n = host_read(s, key, key_len, b);
    if (n >= 0 && (u32)n > b->cap) {
        if (!reserve(b, (u32)n)) {
            return NO_MEMORY;
        }
        n = host_read(s, key, key_len, b);
        if (n >= 0 && (u32)n > b->cap) {
            n = UNSET; /* cannot happen: the value changed between the calls */
        }
    }
    return n < 0 ? UNSET : n;
}

/* ---- Strings -------------------------------------------------------------
 *
 * No libc means no memcmp: equal compares 8 bytes per iteration. Under the
 * host's deadline checks every loop iteration costs tens of nanoseconds
 * (wazero checks on each back-edge), so fewer iterations matter more than
 * in native code. The 8-byte __builtin_memcpy compiles to an unaligned
 * i64.load, not to a call. */
static u64 load64(const u8 *p) {
    u64 v;
    __builtin_memcpy(&v, p, 8);
    return v;
}

static int equal(const u8 *a, u32 alen, const u8 *b, u32 blen) {
    if (alen != blen) {
        return 0;
    }
    u32 i = 0;
    for (; i + 8 <= alen; i += 8) {
        if (load64(a + i) != load64(b + i)) {
            return 0;
        }
    }
    for (; i < alen; i++) {
        if (a[i] != b[i]) {
            return 0;
        }
    }
    return 1;
}

/* ---- Config ----------------------------------------------------------------
 *
 * sdk.ParseConfig, byte for byte: pairs separated by "," or "\n" (empty
 * fields dropped), each trimmed of white space; an empty line or one
 * starting with "#" is skipped; "k=v" splits at the first "=", both sides
 * trimmed; a bare word means "". A later pair wins. White space is Go's
 * unicode.IsSpace, which includes a few multi-byte UTF-8 characters. */

/* space_at returns the length of the white space character starting at p
 * (p < end), or 0. */
static u32 space_at(const u8 *p, const u8 *end) {
    u32 n = (u32)(end - p);
    u8 c = p[0];
    if (c == ' ' || (c >= '\t' && c <= '\r')) { /* \t \n \v \f \r */
        return 1;
    }
    if (c == 0xC2 && n >= 2 && (p[1] == 0x85 || p[1] == 0xA0)) { /* U+0085, U+00A0 */
        return 2;
    }
    if (n >= 3) {
        if (c == 0xE1 && p[1] == 0x9A && p[2] == 0x80) { /* U+1680 */
            return 3;
        }
        if (c == 0xE2 && p[1] == 0x80 &&
            ((p[2] >= 0x80 && p[2] <= 0x8A) || p[2] == 0xA8 || p[2] == 0xA9 || p[2] == 0xAF)) {
            return 3; /* U+2000..U+200A, U+2028, U+2029, U+202F */
        }
        if (c == 0xE2 && p[1] == 0x81 && p[2] == 0x9F) { /* U+205F */
            return 3;
        }
        if (c == 0xE3 && p[1] == 0x80 && p[2] == 0x80) { /* U+3000 */
            return 3;
        }
    }
    return 0;
}

/* space_before returns the length of the white space character ending at
 * end (start < end), or 0. */
static u32 space_before(const u8 *start, const u8 *end) {
    for (u32 n = 1; n <= 3 && n <= (u32)(end - start); n++) {
        if (space_at(end - n, end) == n) {
            return n;
        }
    }
    return 0;
}

/* trim narrows [*s, *e) like strings.TrimSpace. */
static void trim(const u8 **s, const u8 **e) {
    u32 n;
    while (*s < *e && (n = space_at(*s, *e)) != 0) {
        *s += n;
    }
    while (*s < *e && (n = space_before(*s, *e)) != 0) {
        *e -= n;
    }
}

/* config_key finds the value of "key" in the config (s, n) and returns it
 * in *v, *vlen, or "team" if it is missing or empty. */
static void config_key(const u8 *s, u32 n, const u8 **v, u32 *vlen) {
    const u8 *p = s, *end = s + n;
    *v = (const u8 *)"team";
    *vlen = 4;
    while (p < end) {
        const u8 *line = p;
        while (p < end && *p != ',' && *p != '\n') {
            p++;
        }
        const u8 *line_end = p;
        if (p < end) {
            p++; /* the separator */
        }
        trim(&line, &line_end);
        if (line == line_end || *line == '#') {
            continue;
        }
        const u8 *eq = line;
        while (eq < line_end && *eq != '=') {
            eq++;
        }
        const u8 *k = line, *k_end = eq;
        const u8 *val = eq < line_end ? eq + 1 : line_end, *val_end = line_end;
        trim(&k, &k_end);
        trim(&val, &val_end);
        if (equal(k, (u32)(k_end - k), LIT("key"))) {
            /* a later "key" wins; an empty value means the default */
            if (val < val_end) {
                *v = val;
                *vlen = (u32)(val_end - val);
            } else {
                *v = (const u8 *)"team";
                *vlen = 4;
            }
        }
    }
}

/* ---- The per-cycle cache -------------------------------------------------
 *
 * An instance serves many calls, of many cycles (§2). `cycle` is the same
 * for every call about one pod in one cycle and never 0 (§3), so
 * cached_cycle == 0 means nothing is cached yet. The config and the pod's
 * label are read once per cycle; so are the two reasons that depend only on
 * them. */
static i64 cached_cycle;
static const u8 *key; /* the label key: in config_buf, or "team" */
static u32 key_len;
static i32 pod_team_len; /* UNSET if the pod has no such label */
static u32 mismatch_len, shared_len, dedicated_prefix_len; /* 0: not built this cycle */

/* begin loads the cache for cycle; 0 if memory ran out. */
static int begin(i64 cycle) {
    if (cycle == cached_cycle) {
        return 1;
    }
    i32 n = read_value(CONFIG, 0, 0, &config_buf);
    if (n == NO_MEMORY) {
        return 0;
    }
    config_key(config_buf.p, n < 0 ? 0 : (u32)n, &key, &key_len);
    pod_team_len = read_value(POD_LABEL, key, key_len, &pod_team);
    if (pod_team_len == NO_MEMORY) {
        return 0;
    }
    mismatch_len = shared_len = dedicated_prefix_len = 0;
    cached_cycle = cycle;
    return 1;
}

/* ---- Reasons ------------------------------------------------------------------ */

static u8 *put(u8 *p, const u8 *s, u32 n) {
    __builtin_memcpy(p, s, n); /* memory.copy */
    return p + n;
}

/* "<k> label mismatch" */
static int build_mismatch(void) {
    if (mismatch_len == 0) {
        u32 n = key_len + sizeof(" label mismatch") - 1;
        if (!reserve(&mismatch, n)) {
            return 0;
        }
        put(put(mismatch.p, key, key_len), LIT(" label mismatch"));
        mismatch_len = n;
    }
    return 1;
}

/* "node has no <k> label (shared pool), pod belongs to <k> <podTeam>" */
static int build_shared(void) {
    if (shared_len == 0) {
        u32 n = sizeof("node has no ") - 1 + key_len + sizeof(" label (shared pool), pod belongs to ") - 1 +
                key_len + 1 + (u32)pod_team_len;
        if (!reserve(&shared, n)) {
            return 0;
        }
        u8 *p = put(shared.p, LIT("node has no "));
        p = put(p, key, key_len);
        p = put(p, LIT(" label (shared pool), pod belongs to "));
        p = put(p, key, key_len);
        p = put(p, LIT(" "));
        put(p, pod_team.p, (u32)pod_team_len);
        shared_len = n;
    }
    return 1;
}

/* "node is dedicated to <k> <nodeTeam>": the prefix is built once per
 * cycle, the node's value is copied after it for each rejection. */
static int build_dedicated(u32 team_len) {
    if (dedicated_prefix_len == 0) {
        u32 n = sizeof("node is dedicated to ") - 1 + key_len + 1;
        if (!reserve(&dedicated, n)) {
            return 0;
        }
        u8 *p = put(dedicated.p, LIT("node is dedicated to "));
        p = put(p, key, key_len);
        put(p, LIT(" "));
        dedicated_prefix_len = n;
    }
    if (!reserve(&dedicated, dedicated_prefix_len + team_len)) {
        return 0;
    }
    put(dedicated.p + dedicated_prefix_len, node_team.p, team_len);
    return 1;
}

/* ---- The policy --------------------------------------------------------------
 *
 * evaluate decides the current node, exactly as ../team-isolation/main.go
 * does. A node that passes costs no host call beyond the node's label: the
 * status is Success unless set_status is called (§3). The host copies the
 * reason at set_status, so the buffers can be reused right away. */
static void evaluate(i64 cycle) {
    if (!begin(cycle)) {
        set_status(CODE_ERROR, LIT("out of memory"));
        return;
    }
    i32 node_team_len = read_value(NODE_LABEL, key, key_len, &node_team);
    int ok = 1;
    if (node_team_len == NO_MEMORY) {
        ok = 0;
    } else if (pod_team_len != UNSET && node_team_len == UNSET) {
        if ((ok = build_shared())) {
            set_status(CODE_UNSCHEDULABLE, shared.p, shared_len);
        }
    } else if (pod_team_len != UNSET &&
               !equal(node_team.p, (u32)node_team_len, pod_team.p, (u32)pod_team_len)) {
        if ((ok = build_mismatch())) {
            set_status(CODE_UNSCHEDULABLE, mismatch.p, mismatch_len);
        }
    } else if (pod_team_len == UNSET && node_team_len != UNSET) {
        if ((ok = build_dedicated((u32)node_team_len))) {
            set_status(CODE_UNSCHEDULABLE, dedicated.p, dedicated_prefix_len + (u32)node_team_len);
        }
    }
    if (!ok) {
        set_status(CODE_ERROR, LIT("out of memory"));
    }
}

/* ---- Exports (docs/abi.md §1, §3) ----------------------------------------------
 *
 * Exported by name with -Wl,--export=<name> (see README.md). */

/* () -> i32 */
i32 abi_version(void) { return 1; }

/* () -> i32: filter (2) | filter_nodes (32). Without this export the host
 * would infer the same from the exports present; it is here as the model. */
i32 capabilities(void) { return 2 | 32; }

/* (cycle i64) -> (): one node, already current. */
void filter(i64 cycle) { evaluate(cycle); }

/* (cycle i64, n i32) -> (): n nodes in one call (§3.1). select_node(i)
 * makes node i current for node_label and set_status and starts its
 * deadline; each node is then evaluated exactly as filter does. A node
 * that passes needs nothing: only rejections call set_status. */
void filter_nodes(i64 cycle, i32 n) {
    for (i32 i = 0; i < n; i++) {
        if (select_node(i) != 0) {
            return; /* not a batch, or i out of range: cannot happen for i < n */
        }
        evaluate(cycle);
    }
}
