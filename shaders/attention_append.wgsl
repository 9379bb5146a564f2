// A decode step's new keys and values, taken where the QKV projection left them (q's row: the
// queries, then kv_heads x D keys, then as many values) instead of from the cache, and written
// to the cache on the way: with APPEND, attention needs no kv_write dispatch before it.
// In a decode step each token is the only new one of its sequence, so the only new key it
// attends to is its own, the last (position pos). Prepended to attention and attention_split,
// which declare q, k_cache and v_cache (read_write vec4s), inv_freq (rotary.wgsl) and
// qs (the query in vec4s, RoPE applied and pre-scaled, zero past D). Keys are read 16 bytes at a
// time; APPEND needs D % 4 == 0 (the new key is written a vec4 at a time), which the Rust side
// checks.
override APPEND: bool = false;
var<workgroup> new_key: array<f32, 256>;  // the token's own key, RoPE applied

// Where token t's new key for the KV head at column kv_off starts in q (its value kv_heads x D
// further).
fn new_key_at(t: u32, kv_off: u32) -> u32 {
    return t * shape.q_stride + shape.heads * shape.head_dim + kv_off;
}

// Fills new_key with the key at `at`, rotated for position `pos`, `threads` dims at a time. The
// caller's next barrier publishes it.
fn load_new_key(at: u32, pos: u32, tid: u32, threads: u32) {
    let d = shape.head_dim;
    for (var i = tid; i < d; i += threads) {
        new_key[i] = rotary(q[at + i], q[at + rotary_partner(i, d)], i, d, pos);
    }
}

// Values 4c .. 4c + 3 of the new value of the key at `at` (c < D / 4). With `stores` (one query
// head per KV group), they are written to the value cache row starting at word `row_at` (a
// multiple of 4, as D is).
fn new_value_quad(at: u32, c: u32, row_at: u32, stores: bool) -> vec4<f32> {
    let v = at + shape.kv_heads * shape.head_dim + 4u * c;
    let quad = vec4<f32>(q[v], q[v + 1u], q[v + 2u], q[v + 3u]);
    if stores {
        v_cache[row_at / 4u + c] = quad;
    }
    return quad;
}

// Writes new_key (published by a barrier since load_new_key) to the key cache row at word
// `row_at` (a multiple of 4), a vec4 per thread.
fn store_new_key(row_at: u32, tid: u32, threads: u32) {
    for (var c = tid; c < shape.head_dim / 4u; c += threads) {
        k_cache[row_at / 4u + c] = new_key_quad(c);
    }
}

// Values 4c .. 4c + 3 of the token's own key (zero past D: new_key's rest is never written).
fn new_key_quad(c: u32) -> vec4<f32> {
    return vec4<f32>(new_key[4u * c], new_key[4u * c + 1u], new_key[4u * c + 2u], new_key[4u * c + 3u]);
}

// The query (the kernel's qs) times the key of the cache row starting at word `row_at`, or with
// `own` times the token's own key (new_key).
fn key_score(row_at: u32, own: bool) -> f32 {
    let quads = (shape.head_dim + 3u) / 4u;
    var s = 0.0;
    if own {
        for (var c = 0u; c < quads; c++) {
            s += dot(qs[c], new_key_quad(c));
        }
    } else if shape.head_dim % 4u == 0u {
        // Eight loads of the row in flight at a time: each is a memory latency otherwise (a
        // 64-wide row in two rounds, a 128-wide one in four).
        let at = row_at / 4u;
        var c = 0u;
        for (; c + 8u <= quads; c += 8u) {
            let k0 = k_cache[at + c];
            let k1 = k_cache[at + c + 1u];
            let k2 = k_cache[at + c + 2u];
            let k3 = k_cache[at + c + 3u];
            let k4 = k_cache[at + c + 4u];
            let k5 = k_cache[at + c + 5u];
            let k6 = k_cache[at + c + 6u];
            let k7 = k_cache[at + c + 7u];
            s += (dot(qs[c], k0) + dot(qs[c + 1u], k1)) + (dot(qs[c + 2u], k2) + dot(qs[c + 3u], k3))
                + (dot(qs[c + 4u], k4) + dot(qs[c + 5u], k5)) + (dot(qs[c + 6u], k6) + dot(qs[c + 7u], k7));
        }
        for (; c < quads; c++) {
            s += dot(qs[c], k_cache[at + c]);
        }
    } else {
        for (var i = 0u; i < shape.head_dim; i++) {
            s = fma(qs[i / 4u][i % 4u], k_cache[(row_at + i) / 4u][(row_at + i) % 4u], s);
        }
    }
    return s;
}

// Whether query head h is the one of its KV group that writes the new rows.
fn stores_new_rows(h: u32) -> bool {
    return h % (shape.heads / shape.kv_heads) == 0u;
}
