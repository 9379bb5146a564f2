// The uniform every attention kernel reads (attention, attention_split, attention_combine,
// attention_direct), prepended to each.
struct Shape {
    heads: u32,      // query heads
    kv_heads: u32,
    head_dim: u32,   // D <= 256
    splits: u32,     // chunks per (token, head) that the split attention's `partial` has room for
    q_stride: u32,   // row stride of q (the queries are its first heads x D columns)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
