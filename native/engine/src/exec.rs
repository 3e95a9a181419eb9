//! Engine threads with large stacks.
//!
//! Lavapipe's pipeline creation (LLVM) and glslang recurse deeply enough to overflow a BEAM
//! scheduler's stack, which kills the VM. Callers that do not own their threads' stacks (the NIF)
//! run engine work here instead. A fixed set of workers takes jobs from one queue; a job that
//! panics is reported as an error to its caller, never propagated.

use crate::error::{EngineError, Result};
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use std::sync::mpsc::{channel, Sender};

/// Stack size of engine threads.
pub const STACK_BYTES: usize = 64 << 20;

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Workers {
    sender: Mutex<Sender<Job>>,
}

static WORKERS: Lazy<Workers> = Lazy::new(|| {
    let (sender, receiver) = channel::<Job>();
    let receiver = std::sync::Arc::new(Mutex::new(receiver));
    let n = std::env::var("NX_VULKAN_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(2, 8));
    for i in 0..n {
        let receiver = receiver.clone();
        std::thread::Builder::new()
            .name(format!("nx-vulkan-{i}"))
            .stack_size(STACK_BYTES)
            .spawn(move || loop {
                let job = receiver.lock().recv();
                match job {
                    Ok(job) => job(),
                    Err(_) => return,
                }
            })
            .expect("spawning an engine thread");
    }
    Workers { sender: Mutex::new(sender) }
});

/// Runs `f` on an engine thread and waits for its result. A panic inside `f` becomes
/// `EngineError::Vulkan` with the panic message.
pub fn run<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let (tx, rx) = channel();
    let job: Job = Box::new(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(EngineError::Vulkan(format!("internal error (panic in engine thread): {msg}")))
        });
        let _ = tx.send(out);
    });
    WORKERS
        .sender
        .lock()
        .send(job)
        .map_err(|_| EngineError::Vulkan("engine threads are gone".into()))?;
    rx.recv().map_err(|_| EngineError::Vulkan("engine thread dropped the job".into()))?
}
