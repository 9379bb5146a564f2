// linear.wgsl's x as a storage buffer: [M, K] row-major, a vec4 of values per element.
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
