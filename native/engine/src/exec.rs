//! Engine threads with large stacks.
//!
//! Lavapipe's pipeline creation (LLVM) and glslang recurse deeply enough to overflow a BEAM
//! scheduler's stack, which kills the VM. Callers that do not own their threads' stacks (the NIF)
//! run engine work here instead. A fixed set of workers takes jobs from one queue; a job that
//! panics is reported as an error to its caller, never propagated.

use crate::error::{EngineError, Result};
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use std::cell::Cell;
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
                mark_deep_stack();
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
            Err(EngineError::Vulkan(format!("internal error (panic in engine thread): {}", panic_message(&p))))
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

/// Starts a long-lived thread with an engine thread's stack (a runtime's worker loop). A panic
/// in `f` ends the thread, not the process.
pub fn spawn_deep(name: &str, f: impl FnOnce() + Send + 'static) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            mark_deep_stack();
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
                eprintln!("nx_vulkan: thread panicked: {}", panic_message(&p));
            }
        })
        .map_err(|e| EngineError::Vulkan(format!("spawning {name}: {e}")))
}

thread_local! {
    /// Set while `run_shallow_first` tries a call on a thread with a small stack.
    static SHALLOW: Cell<bool> = const { Cell::new(false) };
    /// Set on threads the engine started with `STACK_BYTES` of stack.
    static DEEP: Cell<bool> = const { Cell::new(false) };
    /// Set while `try_without_waiting` runs a call that must not block (a BEAM scheduler).
    static NO_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// Fails with `EngineError::NeedsEngineThread` inside `try_without_waiting`: whatever follows
/// may block (a full queue, a synchronisation point).
pub(crate) fn may_wait() -> Result<()> {
    if NO_WAIT.with(|w| w.get()) {
        Err(EngineError::NeedsEngineThread)
    } else {
        Ok(())
    }
}

/// Runs `f` on the calling thread only if it neither needs a deep stack nor has to wait
/// (kernels built, room in the queue, no synchronisation): `None` when it would, and then
/// nothing was committed. A warm op on a normal BEAM scheduler is recorded this way without
/// the hop to a dirty scheduler; the caller retries the rest where blocking is allowed.
pub fn try_without_waiting<T>(f: impl FnOnce() -> Result<T>) -> Option<Result<T>> {
    SHALLOW.with(|s| s.set(true));
    NO_WAIT.with(|w| w.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    SHALLOW.with(|s| s.set(false));
    NO_WAIT.with(|w| w.set(false));
    match r {
        Ok(Err(EngineError::NeedsEngineThread)) => None,
        Ok(r) => Some(r),
        Err(p) => Some(Err(EngineError::Vulkan(format!("internal error (panic): {}", panic_message(&p))))),
    }
}

/// Marks the calling thread as one with an engine thread's stack.
pub(crate) fn mark_deep_stack() {
    DEEP.with(|d| d.set(true));
}

/// True on engine threads (and the stream's): a driver call that may compile (lavapipe builds
/// shader variants when work first runs, inside `vkQueueSubmit`) is safe here.
pub(crate) fn on_deep_stack() -> bool {
    DEEP.with(|d| d.get())
}

/// Fails with `EngineError::NeedsEngineThread` when called inside `run_shallow_first`'s first
/// attempt: whatever follows (compiling a shader, building a pipeline, opening the device)
/// needs an engine thread's stack.
pub(crate) fn require_deep_stack() -> Result<()> {
    if SHALLOW.with(|s| s.get()) {
        Err(EngineError::NeedsEngineThread)
    } else {
        Ok(())
    }
}

/// Runs `f` on the calling thread when it needs no deep stack (every kernel it uses is built
/// and the device is open), else on an engine thread. Recording a warm op this way costs no
/// thread handoff. `f` may run twice: its first attempt stops before it commits any work
/// (ops commit only at the end, and a kernel is looked up before anything is committed), and
/// what it allocated is released when it returns the error.
pub fn run_shallow_first<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Clone + Send + 'static,
{
    let attempt = {
        let f = f.clone();
        SHALLOW.with(|s| s.set(true));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        SHALLOW.with(|s| s.set(false));
        r
    };
    match attempt {
        Ok(Err(EngineError::NeedsEngineThread)) => run(f),
        Ok(r) => r,
        Err(p) => Err(EngineError::Vulkan(format!("internal error (panic): {}", panic_message(&p)))),
    }
}

pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}
