//! Admission for generation requests: at most `max_sessions` sessions run at once and at most
//! `queue` more wait for a place; a request beyond that is refused at once (HTTP 503 with
//! `Retry-After`). The server does not batch generation (the [`Generator`](crate::Generator)
//! does); it only bounds how much it hands the generator and how much waits.
//!
//! A request holds a [`Ticket`] from admission until its answer is finished (the last byte of
//! a stream sent, or the stream dropped because the client left); the ticket becomes a running
//! [`Session`] once a place is free.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many generation requests are let in.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Most sessions open on the generator at once.
    pub max_sessions: usize,
    /// Most requests waiting for a session beyond those.
    pub queue: usize,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig { max_sessions: 16, queue: 64 }
    }
}

/// Why a request was not let in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Every place running and waiting is taken.
    Full,
    /// The server is shutting down.
    Closed,
}

pub(crate) struct Admission {
    places: Arc<Semaphore>,
    /// Requests admitted and not yet finished (running or waiting).
    admitted: AtomicUsize,
    config: GenConfig,
    closed: AtomicBool,
}

impl Admission {
    pub fn new(config: GenConfig) -> Arc<Admission> {
        let config = GenConfig { max_sessions: config.max_sessions.max(1), ..config };
        Arc::new(Admission { places: Arc::new(Semaphore::new(config.max_sessions)), admitted: AtomicUsize::new(0), config, closed: AtomicBool::new(false) })
    }

    pub fn config(&self) -> &GenConfig {
        &self.config
    }

    /// Lets a request in, or refuses it at once. Never waits.
    pub fn admit(self: &Arc<Self>) -> Result<Ticket, Refusal> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Refusal::Closed);
        }
        let limit = self.config.max_sessions + self.config.queue;
        self.admitted.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < limit).then_some(n + 1)).map_err(|_| Refusal::Full)?;
        Ok(Ticket { admission: self.clone() })
    }

    /// Refuses new requests from now on; those admitted still run.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Sessions running now.
    pub fn running(&self) -> usize {
        self.config.max_sessions - self.places.available_permits()
    }

    /// Requests admitted and waiting for a session now.
    pub fn waiting(&self) -> usize {
        self.admitted.load(Ordering::SeqCst).saturating_sub(self.running())
    }
}

/// An admitted request; its place is given back when it is dropped.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
}

impl Ticket {
    /// Waits for a place among the running sessions (first come, first served).
    pub async fn run(self) -> Session {
        let permit = self.admission.places.clone().acquire_owned().await.expect("the semaphore is never closed");
        Session { _ticket: self, _permit: permit }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running session's place; given back when dropped.
pub(crate) struct Session {
    // Fields drop in order: the ticket first, so `waiting` never counts a finishing session.
    _ticket: Ticket,
    _permit: OwnedSemaphorePermit,
}
