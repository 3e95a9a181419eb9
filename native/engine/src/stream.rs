//! The device's stream: ops are queued, not waited for (PyTorch-CUDA-style semantics).
//!
//! An op records its commands into a `Batch` and commits it here; the commit appends it to the
//! *open* recording and returns at once. A flusher thread submits the open recording whenever
//! fewer than `in_flight` submissions are running (so an idle device starts work at once, and a
//! busy one gathers the ops that arrive meanwhile into one submission), and retires finished
//! submissions: their fences are reset for reuse and what they kept alive (staging buffers,
//! kernels) is released. Device buffers go back to the pool as soon as the op that last used
//! them is committed: the pool hands them to later ops in stream order, and lets the host
//! write or free one only once the work that may use it has retired (`StreamClock`).
//!
//! Order is call order: there is one open recording per device, and submissions go to one
//! queue with a barrier in front of every command, so a handle made by one thread and used by
//! another needs nothing from the user.
//!
//! Synchronisation points (`wait_for`, `synchronize`: downloads, index checks) submit what is
//! open themselves and wait, spinning briefly before blocking. An error in queued work (a
//! failed submission, a lost device) is held and returned by the next synchronisation point,
//! naming the kernels of the submission that failed.
//!
//! Thresholds (environment, read once per device):
//! - `NX_VULKAN_SYNC=1`: every op waits for its own completion (debugging; same results).
//! - `NX_VULKAN_IN_FLIGHT` (default 2): submissions running before new work is gathered.
//! - `NX_VULKAN_BATCH_COMMANDS` (default 256): an open recording this long is submitted even
//!   while `in_flight` submissions are running.
//! - `NX_VULKAN_MAX_QUEUED` (default 8): submissions queued at most; a commit beyond it waits
//!   (back-pressure bounds the memory queued work keeps alive).
//! - `NX_VULKAN_COALESCE_US` (default 20): how long an idle device waits after an op arrives
//!   for more to share its submission (a waiter cuts it short).
//! - `NX_VULKAN_SPIN_US`, `NX_VULKAN_INLINE_SUBMIT`: see `StreamConfig`.

use crate::error::{EngineError, Result};
use crate::submit::{Command, DeviceHandles, Keep, Profiling, Recording, Submitter};
use crate::Counters;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::{Acquire, Relaxed, Release}};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vulkano::VulkanObject;

/// Where the stream is, for the buffer pool. A buffer released when `used` is `k` may be used
/// by queued work up to id `k` and by nothing after: later device work is ordered after it on
/// the queue (every command starts with a barrier), so the pool may hand the buffer to any
/// later op at once, as PyTorch's caching allocator does on one stream. Only host access
/// (writing a mapped buffer, or freeing the memory) waits until `retired >= k`.
#[derive(Debug)]
pub struct StreamClock {
    /// Every submission up to this id has completed (or failed).
    pub retired: AtomicU64,
    /// The newest submission that holds commands (open or not): set when work joins the open
    /// recording, before the buffers that work uses can be released. An idle stream's `used`
    /// is retired, so buffers freed while nothing is queued are at once free for host writes
    /// (stamping the open recording's id instead kept every buffer freed between submissions
    /// from small uploads until the next op ran: 200 k tiny uploads in a row each made a new
    /// device allocation).
    pub used: AtomicU64,
}

impl StreamClock {
    pub(crate) fn new() -> StreamClock {
        StreamClock { retired: AtomicU64::new(0), used: AtomicU64::new(0) }
    }
}

/// The stream's thresholds; see the module docs for their environment variables.
#[derive(Clone, Debug)]
pub struct StreamConfig {
    pub synchronous: bool,
    pub in_flight: usize,
    pub batch_commands: usize,
    pub max_queued: usize,
    /// How long waiters and the flusher spin on a fence before blocking: a small op finishes
    /// within it on a GPU, and a spin avoids a sleep/wake round trip (≈20 µs on the H200). Zero
    /// on CPU devices (lavapipe), where a spinning thread takes a core from the driver.
    /// `NX_VULKAN_SPIN_US` overrides it.
    pub spin: Duration,
    /// How long an idle device waits after the first op of a burst before submitting it, so
    /// that the ops right behind it share the submission (20 µs; `NX_VULKAN_COALESCE_US`).
    pub coalesce: Duration,
    /// Whether any thread may submit (a waiter submits what it waits for instead of waking
    /// the flusher). Off on CPU devices: lavapipe may compile inside vkQueueSubmit, which
    /// needs an engine thread's stack. `NX_VULKAN_INLINE_SUBMIT=0/1` overrides it.
    pub inline_submit: bool,
}

impl StreamConfig {
    pub fn from_env(caps: &crate::DeviceCaps) -> StreamConfig {
        let num = |name: &str, default: usize| {
            std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&v: &usize| v > 0).unwrap_or(default)
        };
        let in_flight = num("NX_VULKAN_IN_FLIGHT", 2);
        StreamConfig {
            synchronous: matches!(std::env::var("NX_VULKAN_SYNC").as_deref(), Ok("1") | Ok("true")),
            in_flight,
            batch_commands: num("NX_VULKAN_BATCH_COMMANDS", 256),
            max_queued: num("NX_VULKAN_MAX_QUEUED", 8).max(in_flight),
            coalesce: Duration::from_micros(std::env::var("NX_VULKAN_COALESCE_US").ok().and_then(|v| v.parse().ok()).unwrap_or(20)),
            inline_submit: match std::env::var("NX_VULKAN_INLINE_SUBMIT").as_deref() {
                Ok("1") | Ok("true") => true,
                Ok("0") | Ok("false") => false,
                _ => caps.device_type != "cpu",
            },
            spin: Duration::from_micros(
                std::env::var("NX_VULKAN_SPIN_US")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(if caps.device_type == "cpu" { 0 } else { 100 }),
            ),
        }
    }
}

/// The flusher's longest blocking fence wait before it looks for new work again.
const FENCE_POLL: Duration = Duration::from_micros(200);

/// Device time of one kernel (or of copies) while profiling: see `Stream::profile_start`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelProfile {
    /// The kernel's key (what it computes, over which types and layouts), or "copy".
    pub name: String,
    /// Times it ran.
    pub runs: u64,
    /// Device time, in nanoseconds, from timestamps around each run.
    pub device_ns: f64,
    /// Bytes copied (copies only).
    pub bytes: u64,
}

/// What the oldest submission is waiting on.
enum Front {
    Empty,
    Fence(ash::vk::Fence),
    /// It never reached the queue (or its fence failed): retire it at once.
    Failed,
}

struct InFlight {
    id: u64,
    submitter: Option<Submitter>,
    keep: Vec<Keep>,
    error: Option<String>,
}

/// A failure in queued work, held until a synchronisation point reports it.
struct QueuedFailure {
    id: u64,
    labels: Vec<String>,
    message: String,
}

struct State {
    open: Recording,
    /// The id the open recording gets when submitted; ids start at 1.
    open_id: u64,
    in_flight: VecDeque<InFlight>,
    spare: Vec<Submitter>,
    failure: Option<QueuedFailure>,
    inject: Option<String>,
    closed: bool,
    /// When the open recording got its first command (for the coalescing window).
    open_since: Option<Instant>,
}

struct Shared {
    dev: DeviceHandles,
    counters: Arc<Counters>,
    config: StreamConfig,
    synchronous: AtomicBool,
    state: Mutex<State>,
    /// Held from taking the open recording until its submission is on the queue, so
    /// submissions reach the queue in id order.
    submit_lock: Mutex<()>,
    /// `retired` (every id up to it has completed or failed) and the open recording's id,
    /// shared with the buffer pool (stream-ordered reuse).
    clock: Arc<StreamClock>,
    in_flight_len: AtomicUsize,
    has_open: AtomicBool,
    /// A waiter needs the open recording submitted now, whatever is running.
    urgent: AtomicBool,
    /// Held by whoever polls, waits on or resets fences (the flusher, or a spinning waiter):
    /// a fence is never reset while another thread looks at it.
    fence_lock: Mutex<()>,
    /// Per-kernel device times while profiling is on (`None`: off).
    profile: Mutex<Option<std::collections::HashMap<String, KernelProfile>>>,
    /// What profiling times: [`Profiling`] as u8.
    profiling: AtomicU8,
    /// Wakes the flusher: new work, or shutdown.
    wake: Condvar,
    /// Wakes waiters: a submission retired.
    done: Condvar,
}

/// The part of the stream a pending read-back needs after it is dropped.
pub(crate) struct StreamKeeper(Arc<Shared>);

impl StreamKeeper {
    /// Keeps `keep` alive until submission `id` has completed (dropped at once if it has):
    /// for what a caller stops waiting for, such as the staging buffer of an abandoned
    /// read-back, which the device may still be writing.
    pub(crate) fn keep_until(&self, id: u64, keep: Keep) {
        let s = &*self.0;
        loop {
            {
                let mut st = s.state.lock();
                if s.clock.retired.load(Acquire) >= id {
                    break;
                }
                if st.open_id == id && !st.open.is_empty() {
                    st.open.keep.push(keep);
                    return;
                }
                if let Some(f) = st.in_flight.iter_mut().find(|f| f.id == id) {
                    f.keep.push(keep);
                    return;
                }
            }
            // Between the open recording and the queue (a submission under way): wait it out.
            drop(s.submit_lock.lock());
        }
        drop(keep);
    }
}

/// The device's queue of work, with the thread that submits and retires it.
pub struct Stream {
    shared: Arc<Shared>,
    flusher: Option<std::thread::JoinHandle<()>>,
}

impl Stream {
    pub(crate) fn new(dev: DeviceHandles, counters: Arc<Counters>, clock: Arc<StreamClock>, config: StreamConfig) -> Result<Stream> {
        let shared = Arc::new(Shared {
            dev,
            counters,
            synchronous: AtomicBool::new(config.synchronous),
            config,
            state: Mutex::new(State {
                open: Recording::default(),
                open_id: 1,
                in_flight: VecDeque::new(),
                spare: vec![],
                failure: None,
                inject: None,
                closed: false,
                open_since: None,
            }),
            submit_lock: Mutex::new(()),
            fence_lock: Mutex::new(()),
            profile: Mutex::new(None),
            profiling: AtomicU8::new(Profiling::Off as u8),
            clock,
            in_flight_len: AtomicUsize::new(0),
            has_open: AtomicBool::new(false),
            urgent: AtomicBool::new(false),
            wake: Condvar::new(),
            done: Condvar::new(),
        });
        let for_thread = shared.clone();
        let flusher = std::thread::Builder::new()
            .name("nx-vulkan-stream".into())
            // Submission and memory frees reach the driver; give them an engine thread's stack.
            .stack_size(crate::exec::STACK_BYTES)
            .spawn(move || {
                crate::exec::mark_deep_stack();
                for_thread.flush_loop()
            })
            .map_err(|e| EngineError::Vulkan(format!("starting the stream thread: {e}")))?;
        Ok(Stream { shared, flusher: Some(flusher) })
    }

    /// Queues `rec` after everything committed before it. Returns the id of the submission it
    /// will be part of (for `wait_for`). In synchronous mode, waits for it.
    pub(crate) fn commit(&self, rec: Recording) -> Result<u64> {
        let s = &*self.shared;
        let (dispatches, concurrent, copies, kept) = Command::counts(&rec.commands);
        let mut st = s.state.lock();
        // A caller that must not block hears so before anything is committed or counted.
        if !rec.is_empty() && (st.in_flight.len() >= s.config.max_queued || s.synchronous.load(Relaxed)) {
            crate::exec::may_wait()?;
        }
        s.counters.dispatches.fetch_add(dispatches, Relaxed);
        s.counters.concurrent_dispatches.fetch_add(concurrent, Relaxed);
        s.counters.copies.fetch_add(copies, Relaxed);
        s.counters.kept_runs.fetch_add(kept, Relaxed);
        s.counters.recordings.fetch_add(1, Relaxed);
        if rec.is_empty() {
            // Nothing for the device; `keep` may still hold buffers, released now.
            return Ok(if st.open.is_empty() { st.open_id - 1 } else { st.open_id });
        }
        // Back-pressure: never more than `max_queued` submissions alive.
        while st.in_flight.len() >= s.config.max_queued {
            s.done.wait_for(&mut st, Duration::from_millis(1));
        }
        // Buffers the op used are released once it is in the stream, not when it has run: the
        // pool hands them to later ops in stream order (see `StreamClock`).
        let mut rec = rec;
        let buffers = rec.take_buffers();
        if st.open.is_empty() {
            st.open_since = Some(Instant::now());
        }
        st.open.append(rec);
        let id = st.open_id;
        s.clock.used.store(id, Release);
        s.has_open.store(true, Release);
        drop(st);
        drop(buffers);
        if s.synchronous.load(Relaxed) {
            self.wait_for(id)?;
        } else {
            s.wake.notify_one();
        }
        Ok(id)
    }

    /// Has the open recording submitted now if it holds `id` (from this thread where that is
    /// safe, else by the flusher at once), without waiting for it to run.
    pub(crate) fn submit_now(&self, id: u64) {
        let s = &*self.shared;
        let open = { s.state.lock().open_id <= id };
        if open && (s.config.inline_submit || crate::exec::on_deep_stack()) {
            s.submit_open();
        } else if open {
            s.urgent.store(true, Release);
        }
        s.wake.notify_one();
    }

    /// Waits until submission `id` and everything before it have completed; returns the first
    /// failure of queued work not reported yet, if it happened at or before `id`.
    pub(crate) fn wait_for(&self, id: u64) -> Result<()> {
        let s = &*self.shared;
        if s.clock.retired.load(Acquire) < id {
            crate::exec::may_wait()?;
            // Still open? Submit it from here rather than waiting for the flusher to wake — where
            // that is safe: on GPUs, or on threads with a deep stack (lavapipe may compile
            // shader variants inside vkQueueSubmit).
            self.submit_now(id);
            self.spin_for(id, s.config.spin);
            if s.clock.retired.load(Acquire) < id {
                let mut st = s.state.lock();
                while s.clock.retired.load(Acquire) < id {
                    s.done.wait_for(&mut st, Duration::from_millis(1));
                }
            }
        }
        self.take_failure(id)
    }

    /// Spins up to `budget` (a zero budget: one look), polling the fences ourselves whenever
    /// the flusher is not: a sleeping flusher takes tens of µs to wake, longer than a small op
    /// runs.
    fn spin_for(&self, id: u64, budget: Duration) {
        let s = &*self.shared;
        let deadline = Instant::now() + budget;
        while s.clock.retired.load(Acquire) < id {
            match s.fence_lock.try_lock() {
                Some(_polling) => s.poll_front_until(deadline, &|| s.clock.retired.load(Acquire) >= id),
                None => std::hint::spin_loop(),
            }
            if Instant::now() >= deadline {
                break;
            }
        }
    }

    /// `wait_for` that never blocks: submits `id` if it is still open, spins up to `budget`
    /// and says whether it has completed. Failures of queued work are reported as `wait_for`
    /// reports them, once it has.
    pub(crate) fn wait_within(&self, id: u64, budget: Duration) -> Result<bool> {
        let s = &*self.shared;
        if s.clock.retired.load(Acquire) < id {
            self.submit_now(id);
            self.spin_for(id, budget);
            if s.clock.retired.load(Acquire) < id {
                return Ok(false);
            }
        }
        self.take_failure(id).map(|()| true)
    }

    /// A handle that keeps things alive until a submission has run, usable after the caller
    /// lets go of the context (see [`StreamKeeper::keep_until`]).
    pub(crate) fn keeper(&self) -> StreamKeeper {
        StreamKeeper(self.shared.clone())
    }

    /// The id `synchronize` waits for: the last submission committed so far.
    pub(crate) fn last_id(&self) -> u64 {
        let st = self.shared.state.lock();
        if st.open.is_empty() { st.open_id - 1 } else { st.open_id }
    }

    fn take_failure(&self, id: u64) -> Result<()> {
        let s = &*self.shared;
        let mut st = s.state.lock();
        match &st.failure {
            Some(f) if f.id <= id => {
                let f = st.failure.take().expect("checked");
                Err(EngineError::QueuedWork {
                    submission: f.id,
                    kernels: f.labels.join(", "),
                    message: f.message,
                })
            }
            _ => Ok(()),
        }
    }

    /// Waits for everything committed so far.
    pub fn synchronize(&self) -> Result<()> {
        self.wait_for(self.last_id())
    }

    /// Makes every op wait for its own completion (`true`), or queue (`false`).
    pub fn set_synchronous(&self, on: bool) {
        self.shared.synchronous.store(on, Relaxed);
    }

    pub fn is_synchronous(&self) -> bool {
        self.shared.synchronous.load(Relaxed)
    }

    pub fn config(&self) -> &StreamConfig {
        &self.shared.config
    }

    /// Submissions queued or running now.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight_len.load(Relaxed)
    }

    /// Starts timing every kernel on the device (timestamps around each command of every
    /// submission from now on). An error on devices whose queue cannot write timestamps.
    pub fn profile_start(&self) -> Result<()> {
        self.profile_start_as(Profiling::Commands)
    }

    /// Starts timing whole submissions on the device (two timestamps each: when the device
    /// starts the submission's first command and when it finishes its last), reported by
    /// [`Stream::profile_stop`] as one entry named `submission`. Unlike per-command timing
    /// this adds nothing between commands, so the sum says how long the device was busy with
    /// a workload that waits for each submission (submissions queued behind a running one
    /// would overlap and count twice).
    pub fn profile_start_submissions(&self) -> Result<()> {
        self.profile_start_as(Profiling::Submissions)
    }

    /// Whether every command is being timed (kept command buffers are then not used, so that
    /// each of their commands is timed too).
    pub fn profiling_commands(&self) -> bool {
        self.shared.profiling.load(Relaxed) == Profiling::Commands as u8
    }

    fn profile_start_as(&self, mode: Profiling) -> Result<()> {
        if self.shared.dev.timestamp_period_ns.is_none() {
            return Err(EngineError::Unsupported { device: "this device".into(), what: "its compute queue has no timestamps".into() });
        }
        self.synchronize()?;
        *self.shared.profile.lock() = Some(Default::default());
        self.shared.profiling.store(mode as u8, Relaxed);
        Ok(())
    }

    /// Waits for queued work, stops timing and returns device time per kernel, longest first.
    pub fn profile_stop(&self) -> Result<Vec<KernelProfile>> {
        let waited = self.synchronize();
        self.shared.profiling.store(Profiling::Off as u8, Relaxed);
        let mut out: Vec<KernelProfile> = self.shared.profile.lock().take().unwrap_or_default().into_values().collect();
        out.sort_by(|a, b| b.device_ns.total_cmp(&a.device_ns).then(a.name.cmp(&b.name)));
        waited.map(|_| out)
    }

    /// For tests: the next submission fails with `message` instead of reaching the queue, as a
    /// failed `vkQueueSubmit` would; the failure surfaces at the next synchronisation point.
    #[doc(hidden)]
    pub fn inject_failure(&self, message: &str) {
        self.shared.state.lock().inject = Some(message.to_string());
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.shared.state.lock().closed = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    /// Submits the open recording, if any (from the flusher or a waiter).
    fn submit_open(&self) {
        let _order = self.submit_lock.lock();
        let (rec, id, spare, inject) = {
            let mut st = self.state.lock();
            if st.open.is_empty() {
                return;
            }
            let rec = std::mem::take(&mut st.open);
            st.open_since = None;
            let id = st.open_id;
            st.open_id += 1;
            self.has_open.store(false, Release);
            self.urgent.store(false, Release);
            (rec, id, st.spare.pop(), st.inject.take())
        };
        let mut submitter = match spare {
            Some(s) => Ok(s),
            None => {
                self.counters.submitters.fetch_add(1, Relaxed);
                Submitter::new(&self.dev)
            }
        };
        let result = match (&mut submitter, inject) {
            (Err(e), _) => Err(e.to_string()),
            (Ok(_), Some(msg)) => Err(format!("injected failure: {msg}")),
            (Ok(sub), None) => sub.submit(&self.dev, &rec, Profiling::from_u8(self.profiling.load(Relaxed))).map_err(|e| e.to_string()),
        };
        let submitter = match (&result, submitter) {
            (Ok(()), Ok(sub)) => {
                self.counters.submits.fetch_add(1, Relaxed);
                Some(sub)
            }
            // A submitter whose submission failed is in an unknown state: dropped, never reused.
            _ => None,
        };
        let mut st = self.state.lock();
        st.in_flight.push_back(InFlight { id, submitter, keep: rec.keep, error: result.err() });
        self.in_flight_len.store(st.in_flight.len(), Relaxed);
    }

    fn flush_loop(&self) {
        loop {
            let mut st = self.state.lock();
            let running = st.in_flight.len();
            if st.closed && st.open.is_empty() && running == 0 {
                return;
            }
            let submit = !st.open.is_empty()
                && running < self.config.max_queued
                && (running < self.config.in_flight
                    || st.open.commands.len() >= self.config.batch_commands
                    || self.urgent.load(Acquire)
                    || st.closed);
            if submit {
                // An idle device waits `coalesce` after the first op of a burst, so that the
                // ops right behind it — or the read-back that often follows one — share its
                // submission. A waiter needing the work (`urgent`) cuts the window short.
                let waited = st.open_since.map(|t| t.elapsed()).unwrap_or_default();
                if running == 0 && waited < self.config.coalesce && !self.urgent.load(Acquire) && !st.closed {
                    self.wake.wait_for(&mut st, self.config.coalesce - waited);
                    continue;
                }
                drop(st);
                self.submit_open();
                continue;
            }
            if st.in_flight.is_empty() {
                self.wake.wait(&mut st);
                continue;
            }
            drop(st);
            self.wait_front(running);
        }
    }

    /// The flusher's wait for the oldest submission: spin on its fence, then block briefly;
    /// returns early when new work could be submitted.
    fn wait_front(&self, running: usize) {
        let _polling = self.fence_lock.lock();
        let deadline = Instant::now() + self.config.spin;
        let can_submit = || self.has_open.load(Acquire) && (running < self.config.in_flight || self.urgent.load(Acquire));
        let before = self.clock.retired.load(Acquire);
        self.poll_front_until(deadline, &|| can_submit() || self.clock.retired.load(Acquire) != before);
        if self.clock.retired.load(Acquire) != before || can_submit() {
            return;
        }
        if let Front::Fence(fence) = self.front() {
            let fns = self.dev.device.fns();
            let fences = [fence];
            // SAFETY: fences are only reset under `fence_lock`, which we hold; a timeout or
            // an error is looked at again by `retire_locked`.
            unsafe {
                let _ = (fns.v1_0.wait_for_fences)(self.dev.device.handle(), 1, fences.as_ptr(), ash::vk::TRUE, FENCE_POLL.as_nanos() as u64);
            }
        }
        self.retire_locked();
    }

    /// The oldest submission's state. Call with `fence_lock` held (the fence stays valid).
    fn front(&self) -> Front {
        let st = self.state.lock();
        match st.in_flight.front() {
            None => Front::Empty,
            Some(InFlight { error: None, submitter: Some(sub), .. }) => Front::Fence(sub.fence.handle()),
            Some(_) => Front::Failed,
        }
    }

    /// With `fence_lock` held: polls the oldest submission's fence and retires what has
    /// finished, until `done()` or `deadline` (one poll at least).
    fn poll_front_until(&self, deadline: Instant, done: &dyn Fn() -> bool) {
        let fns = self.dev.device.fns();
        let device = self.dev.device.handle();
        loop {
            match self.front() {
                Front::Empty => return,
                Front::Failed => self.retire_locked(),
                Front::Fence(fence) => {
                    // SAFETY: fences are only reset under `fence_lock`, which the caller holds.
                    let status = unsafe { (fns.v1_0.get_fence_status)(device, fence) };
                    if status != ash::vk::Result::NOT_READY {
                        self.retire_locked();
                    }
                }
            }
            if done() || Instant::now() >= deadline {
                return;
            }
            std::hint::spin_loop();
        }
    }

    /// With `fence_lock` held: retires finished submissions in order — fences reset, submitters
    /// back to the spare list, kept resources released (outside the state lock, and before
    /// `retired` moves: a waiter that sees its work done also sees its buffers back in the
    /// pool), waiters woken.
    fn retire_locked(&self) {
        let mut released = vec![];
        let mut last = None;
        {
            let mut st = self.state.lock();
            while let Some(front) = st.in_flight.front_mut() {
                let finished = match (&front.error, &front.submitter) {
                    (Some(_), _) | (None, None) => true,
                    (None, Some(sub)) => match sub.fence.is_signaled() {
                        Ok(signaled) => signaled,
                        Err(e) => {
                            front.error = Some(format!("waiting for the device: {e}"));
                            true
                        }
                    },
                };
                if !finished {
                    break;
                }
                let f = st.in_flight.pop_front().expect("front exists");
                if let (None, Some(mut sub)) = (&f.error, f.submitter) {
                    if let Some(times) = self.dev.timestamp_period_ns.and_then(|p| sub.take_times(p)) {
                        if let Some(profile) = self.profile.lock().as_mut() {
                            for t in times {
                                let k = profile.entry(t.label.clone()).or_insert_with(|| KernelProfile { name: t.label, ..Default::default() });
                                k.runs += 1;
                                k.device_ns += t.ns;
                                k.bytes += t.bytes;
                            }
                        }
                    }
                    if sub.reset().is_ok() {
                        st.spare.push(sub);
                    }
                }
                if let Some(message) = f.error {
                    if st.failure.is_none() {
                        st.failure = Some(QueuedFailure { id: f.id, labels: crate::submit::kernel_names(&f.keep), message });
                    }
                }
                released.push(f.keep);
                last = Some(f.id);
            }
            self.in_flight_len.store(st.in_flight.len(), Relaxed);
        }
        if let Some(id) = last {
            drop(released);
            self.clock.retired.store(id, Release);
            // Taking the lock orders this wake-up after a waiter's check of `retired`.
            drop(self.state.lock());
            self.done.notify_all();
        }
    }
}
