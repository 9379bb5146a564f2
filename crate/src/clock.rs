//! Wall-clock milliseconds, natively and in the browser (where `Instant` does not exist).

/// Milliseconds since an arbitrary fixed point; only differences mean anything.
#[cfg(not(target_arch = "wasm32"))]
pub fn now_ms() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

/// `performance.now()`, in a window or a worker.
#[cfg(target_arch = "wasm32")]
pub fn now_ms() -> f64 {
    let perf = js_sys::Reflect::get(&js_sys::global(), &"performance".into()).ok();
    perf.and_then(|p| {
        let now = js_sys::Reflect::get(&p, &"now".into()).ok()?;
        let now: js_sys::Function = now.into();
        now.call0(&p).ok()?.as_f64()
    })
    .unwrap_or_else(js_sys::Date::now)
}
