// linear.wgsl's x through a uniform binding of 64 KiB (WebGPU's default most): one token row of
// K <= 16384 values, the rest unread. lavapipe loads a storage value lane by lane, each load a
// bounds-checked scalar load of its own, but a uniform value at an offset the same for every
// invocation once for all: x is such a value in a decode step, where every invocation reads
// the same x against weight rows of its own (the binding's size: LINEAR_X_UNIFORM_BYTES).
@group(0) @binding(2) var<uniform> x: array<vec4<f32>, 4096>;
