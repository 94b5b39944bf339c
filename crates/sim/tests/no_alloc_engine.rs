//! The event loop does not allocate per event: once the slab, queues and
//! heap have grown to a run's steady-state population, a further stretch of
//! simulated time allocates only for the per-interval recording rows.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use stormbreak_policy::Nanos;
use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};

struct Counting;

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn allocations() -> u64 {
    COUNT.with(|c| c.get())
}

#[test]
fn steady_state_events_do_not_allocate() {
    // An LB, a gateway with a dependency and retries, sidecar-limited pods:
    // every kind of hop, timeouts in lanes and service times in the heap.
    let text = r#"
[scenario]
name = "steady"
duration = "10m"
interval = "10s"
[[lb]]
name = "edge"
nodes = 2
flows_per_node = 400
[[gateway]]
name = "gw"
dependency = "auth"
timeout = "200ms"
retry = { max_attempts = 3, backoff = { base = "10ms" } }
[[service]]
name = "auth-svc"
replicas = 2
sidecar = { limit = 8, queue = 32, queue_timeout = "50ms" }
app = { workers = 16, service_time = { dist = "exponential", mean = "2ms" } }
[[service]]
name = "svc"
replicas = 4
sidecar = { limit = 16, queue = 16, queue_timeout = "100ms" }
app = { workers = 16, service_time = { dist = "lognormal", median = "5ms", sigma = 0.8 } }
[[route]]
name = "auth"
path = ["auth-svc"]
[[route]]
name = "r"
path = ["edge", "gw", "svc"]
[[client]]
name = "users"
route = "r"
rate = "5k/s"
timeout = "500ms"
retry = { max_attempts = 2, backoff = { base = "20ms" } }
"#;
    let sc = Scenario::parse("steady.toml", text).unwrap();
    let mut engine = Engine::new(&sc, RunOptions::default());
    engine.run_until(Nanos::from_secs(120)).unwrap(); // warm up to the steady population
    let (a0, e0) = (allocations(), engine.events());
    engine.run_until(Nanos::from_secs(300)).unwrap();
    let (allocs, events) = (allocations() - a0, engine.events() - e0);
    assert!(events > 1_000_000, "too few events to judge: {events}");
    eprintln!("{allocs} allocations over {events} events");
    // 18 intervals × a handful of amortised row pushes, never per event.
    assert!(
        allocs < events / 10_000,
        "{allocs} allocations over {events} events"
    );
}
