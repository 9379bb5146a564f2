// Causal grouped-query attention over the KV cache, one query head at a time: decode steps, and
// prefills whose head shapes attention_grouped.wgsl (all heads of a KV head at once) does not take.
// Token t (at position pos in the sequence whose cache rows start at base) attends to cache rows
// base + 0 ..= base + pos. Query head h reads kv head h / (heads / kv_heads). Keys are scanned in
// blocks with an online softmax, so any length fits in a fixed amount of workgroup memory.
// RoPE is applied to the query as it is read (rotary.wgsl); the cached keys have it already.
// With APPEND (attention_append.wgsl) the token's own key and value come from q's row, and one
// query head per KV group writes them to the cache.
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;     // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> q: array<f32>;              // [M, q_stride]: queries, keys, values, before RoPE
@group(0) @binding(3) var<storage, read_write> k_cache: array<vec4<f32>>;  // [rows, kv_heads * D] (written with APPEND)
@group(0) @binding(4) var<storage, read_write> v_cache: array<f32>;  // [rows, kv_heads * D] (written with APPEND)
@group(0) @binding(5) var<storage, read_write> out: array<f32>;      // [M, heads * D]
@group(0) @binding(6) var<storage, read> inv_freq: array<f32>;       // [D / 2] (rotary.wgsl)

const BLOCK: u32 = 256u;
var<workgroup> qs: array<vec4<f32>, 64>;  // this head's query, pre-scaled by 1 / sqrt(D), zero past D
var<workgroup> scores: array<f32, BLOCK>;
var<workgroup> seen: u32;

// One workgroup per (head, token).
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let h = wg.x;
    let t = wg.y;
    let d = shape.head_dim;
    let kv_width = shape.kv_heads * d;
    let kv_off = (h / (shape.heads / shape.kv_heads)) * d;
    let base = token_meta[t].x;
    if tid == 0u {
        seen = token_meta[t].y + 1u;
    }
    let len = workgroupUniformLoad(&seen);
    let scale = inverseSqrt(f32(d));
    let q0 = t * shape.q_stride + h * d;
    let pos = token_meta[t].y;
    for (var c = tid; c < (d + 3u) / 4u; c += WG) {
        qs[c] = query_quad(q0, c, pos) * scale;
    }
    let new_at = new_key_at(t, kv_off);
    if APPEND {
        load_new_key(new_at, pos, tid, WG);
    }
    workgroupBarrier();

    var run_max = -3.4e38;
    var run_sum = 0.0;
    // Output dims tid, tid + WG, tid + 2 WG and tid + 3 WG (D <= 4 WG), in named components: an
    // indexed local array would be left in slow memory by some compilers.
    var acc = vec4<f32>(0.0);
    for (var start = 0u; start < len; start += BLOCK) {
        let n = min(BLOCK, len - start);
        // With APPEND the last block ends with the token's own key.
        let has_new = APPEND && start + n == len;
        var local_max = -3.4e38;
        for (var j = tid; j < n; j += WG) {
            let s = key_score((base + start + j) * kv_width + kv_off, has_new && j == n - 1u);
            scores[j] = s;
            local_max = max(local_max, s);
        }
        let new_max = max(run_max, reduce(local_max, tid, true));
        var local_sum = 0.0;
        for (var j = tid; j < n; j += WG) {
            let p = exp(scores[j] - new_max);
            scores[j] = p;
            local_sum += p;
        }
        let block_sum = reduce(local_sum, tid, false);  // its barriers also publish scores[]
        let rescale = exp(run_max - new_max);
        run_sum = run_sum * rescale + block_sum;
        run_max = new_max;
        let first = (base + start) * kv_width + kv_off;
        let fresh = select(NO_NEW, new_at, has_new);
        let stores = has_new && stores_new_rows(h);
        acc = vec4<f32>(
            weigh_values(acc.x * rescale, tid, n, first, kv_width, fresh, stores),
            weigh_values(acc.y * rescale, tid + WG, n, first, kv_width, fresh, stores),
            weigh_values(acc.z * rescale, tid + 2u * WG, n, first, kv_width, fresh, stores),
            weigh_values(acc.w * rescale, tid + 3u * WG, n, first, kv_width, fresh, stores),
        );
        workgroupBarrier();
    }
    if APPEND && stores_new_rows(h) {
        store_new_key((base + pos) * kv_width + kv_off, tid, WG);
    }
    let out0 = (t * shape.heads + h) * d;
    put(out0, tid, acc.x / run_sum);
    put(out0, tid + WG, acc.y / run_sum);
    put(out0, tid + 2u * WG, acc.z / run_sum);
    put(out0, tid + 3u * WG, acc.w / run_sum);
}

// Marks a block without the token's own key (weigh_values' `fresh`).
const NO_NEW: u32 = 0xffffffffu;

// Output dim i (< D) so far, `a` (already rescaled), plus this block's n probabilities times
// the value rows starting at word `first` (stride `kv_width`); 0 for i past D. Unless `fresh`
// is NO_NEW, the last value is the new one of the key at `fresh` in q (stored with `stores`:
// new_value).
fn weigh_values(a: f32, i: u32, n: u32, first: u32, kv_width: u32, fresh: u32, stores: bool) -> f32 {
    if i >= shape.head_dim {
        return 0.0;
    }
    let cached = select(n, n - 1u, fresh != NO_NEW);
    var s = a;
    for (var j = 0u; j < cached; j++) {
        s = fma(scores[j], v_cache[first + j * kv_width + i], s);
    }
    if fresh != NO_NEW {
        s = fma(scores[n - 1u], new_value(fresh, i, first + (n - 1u) * kv_width + i, stores), s);
    }
    return s;
}

fn put(row: u32, i: u32, value: f32) {
    if i < shape.head_dim {
        out[row + i] = value;
    }
}
