// A decode step's new keys and values, taken where the QKV projection left them (q's row: the
// queries, then kv_heads x D keys, then as many values) instead of from the cache, and written
// to the cache on the way: with APPEND, attention needs no kv_write dispatch before it.
// In a decode step each token is the only new one of its sequence, so the only new key it
// attends to is its own, the last (position pos). Prepended to attention and attention_split,
// which declare q, k_cache (read_write), v_cache (read_write), inv_freq (rotary.wgsl) and qs
// (the query, RoPE applied and pre-scaled).
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

// Dim i of the new value of the key at `at`. With `stores` (one query head per KV group), dim i
// of the new key and of the value are written to the cache at word `cache_at`.
fn new_value(at: u32, i: u32, cache_at: u32, stores: bool) -> f32 {
    let value = q[at + shape.kv_heads * shape.head_dim + i];
    if stores {
        k_cache[cache_at] = new_key[i];
        v_cache[cache_at] = value;
    }
    return value;
}

// The query (the kernel's qs: RoPE applied, pre-scaled) times the key of the cache row starting
// at word `row_at`, or with `own` times the token's own key (new_key).
fn key_score(row_at: u32, own: bool) -> f32 {
    var s = 0.0;
    if own {
        for (var i = 0u; i < shape.head_dim; i++) {
            s = fma(qs[i], new_key[i], s);
        }
    } else {
        for (var i = 0u; i < shape.head_dim; i++) {
            s = fma(qs[i], k_cache[row_at + i], s);
        }
    }
    return s;
}

// Whether query head h is the one of its KV group that writes the new rows.
fn stores_new_rows(h: u32) -> bool {
    return h % (shape.heads / shape.kv_heads) == 0u;
}
