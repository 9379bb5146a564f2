// Weighing the values, for attention and attention_split (prepended to them after
// attention_append.wgsl, which declare v_cache as vec4s): thread tid takes quad c = tid % Q of
// the head (dims 4c .. 4c + 3, Q = D / 4 rounded up) for the subset s = tid / Q of a block's
// keys (keys s, s + S, s + 2S, ... of S = WG / Q subsets), so a thread walks n / S keys, not n,
// two at a time (4 values of a row a key: one 16-byte load where D is a multiple of 4, as in
// every Qwen2.5, so the Q threads of a key read its row in whole 16-byte pieces). On a GPU each step
// of that walk is a memory latency (a decode step has too few workgroups to hide it), and
// latency, not bandwidth, is what a decode step's attention costs. The subsets' sums meet at the
// end (subset_total): the same softmax rescaling applies to all of them.
var<workgroup> probs: array<f32, BLOCK>;          // a block's scores, then its probabilities
var<workgroup> subsets: array<vec4<f32>, WG>;     // [S, Q]: each subset's sums, for subset_total

// Keys per block (one per thread in the split kernel, whose blocks are WG keys: WG <= BLOCK).
const BLOCK: u32 = 256u;

// Marks a block without the token's own key (weigh_quad's `fresh`).
const NO_NEW: u32 = 0xffffffffu;

fn value_quads() -> u32 {
    return (shape.head_dim + 3u) / 4u;
}

// Values 4c .. 4c + 3 of the value row starting at word `at` (c < Q); zero past D. Where D is a
// multiple of 4 every row starts on a whole vec4 and holds whole quads: one load.
fn value_quad(at: u32, c: u32) -> vec4<f32> {
    let i = 4u * c;
    let d = shape.head_dim;
    if d % 4u == 0u {
        return v_cache[(at + i) / 4u];
    }
    return vec4<f32>(value_or_zero(at + i, i < d), value_or_zero(at + i + 1u, i + 1u < d),
        value_or_zero(at + i + 2u, i + 2u < d), value_or_zero(at + i + 3u, i + 3u < d));
}

// Word `at` of the value cache, or zero where it lies past the head (`inside` false).
fn value_or_zero(at: u32, inside: bool) -> f32 {
    if !inside {
        return 0.0;
    }
    return v_cache[at / 4u][at % 4u];
}

// Thread tid's share of a block: probs[j] times its quad of the value rows j of its subset
// (rows from word `first`, stride `kv_width`, j < n). Unless `fresh` is NO_NEW, row n - 1 is
// the token's own value, taken from the key at `fresh` in q and, with `stores`, written to the
// value cache (new_value_quad).
fn weigh_quad(tid: u32, n: u32, first: u32, kv_width: u32, fresh: u32, stores: bool) -> vec4<f32> {
    let quads = value_quads();
    let c = tid % quads;
    let s = tid / quads;
    let count = WG / quads;  // S
    if s >= count {
        return vec4<f32>(0.0);
    }
    let cached = select(n, n - 1u, fresh != NO_NEW);
    // Four independent sums, so four loads are in flight at each step, with no serial tail
    // (weighed_row past the subset's end).
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var j = s; j < cached; j += 4u * count) {
        acc0 += weighed_row(j, cached, first, kv_width, c);
        acc1 += weighed_row(j + count, cached, first, kv_width, c);
        acc2 += weighed_row(j + 2u * count, cached, first, kv_width, c);
        acc3 += weighed_row(j + 3u * count, cached, first, kv_width, c);
    }
    if fresh != NO_NEW && (n - 1u) % count == s {
        let own = new_value_quad(fresh, c, first + (n - 1u) * kv_width, stores);
        acc0 = fma(vec4<f32>(probs[n - 1u]), own, acc0);
    }
    return (acc0 + acc1) + (acc2 + acc3);
}

// probs[j] times quad c of cached value row j (rows from word `first`, stride `kv_width`; j <
// cached, cached >= 1); past them the last cached row (in cache by then) at weight zero, so a
// step's loads never wait on a bounds test.
fn weighed_row(j: u32, cached: u32, first: u32, kv_width: u32, c: u32) -> vec4<f32> {
    let row = min(j, cached - 1u);
    return select(0.0, probs[row], j < cached) * value_quad(first + row * kv_width, c);
}

// The sum over all subsets of each thread's `acc`, for quad tid (meaningful where tid < Q).
// Every thread calls it (it has a barrier).
fn subset_total(acc: vec4<f32>, tid: u32) -> vec4<f32> {
    subsets[tid] = acc;
    workgroupBarrier();
    let quads = value_quads();
    var total = vec4<f32>(0.0);
    if tid < quads {
        for (var s = 0u; s < WG / quads; s++) {
            total += subsets[s * quads + tid];
        }
    }
    return total;
}
