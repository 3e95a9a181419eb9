//! nx_vulkan's model server: an [`Embedder`] (the engine's encoder, or any other) behind a
//! bounded batching queue ([`queue`]), a text [`Generator`] behind a bounded admission gate
//! ([`admission`]; the generator batches its own sessions), an OpenAI-style HTTP API ([`api`],
//! [`completions`]), and the JSON-lines encode loop the `nx-vulkan encode` command runs
//! ([`jsonl`]). A server has an embedder, a generator, or both ([`Server::bind_with`]); the
//! endpoints of a missing one answer 404.
//!
//! ```no_run
//! # async fn demo(embedder: impl nx_vulkan_server::Embedder) -> std::io::Result<()> {
//! use nx_vulkan_server::{Server, ServerConfig};
//! let server = Server::bind("127.0.0.1:8080", embedder, ServerConfig::default()).await?;
//! let stop = server.shutdown_handle(); // stop.shutdown() from anywhere: a graceful stop
//! server.run().await // until `stop` fires: stops accepting, answers what was accepted
//! # }
//! ```
//!
//! Nothing here needs a GPU except [`EngineEmbedder`]; the tests run the whole server with a
//! fake embedder and a fake generator on loopback.

pub mod admission;
pub mod api;
pub mod completions;
pub mod embedder;
pub mod engine_generator;
pub mod generator;
pub mod jsonl;
pub mod metrics;
pub mod queue;

pub use admission::GenConfig;
pub use embedder::{EmbedOutput, Embedder, EngineEmbedder, ModelInfo};
pub use engine_generator::EngineGenerator;
pub use generator::{ChatMessage, FinishReason, GenError, GenEvent, GenModelInfo, GenParams, GenPrompt, GenToken, Generator};
pub use jsonl::{encode_lines, EncodeError, EncodeSummary};
pub use metrics::{GenerationLoad, Metrics};
pub use queue::{BatchQueue, QueueConfig, SubmitError};

use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::watch;

/// How the server runs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub queue: QueueConfig,
    /// When set, `/v1/*` needs `Authorization: Bearer <key>` (`/health` and `/metrics` do not).
    pub api_key: Option<String>,
    /// Largest request body accepted (413 above).
    pub max_body_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { queue: QueueConfig::default(), api_key: None, max_body_bytes: 2 << 20 }
    }
}

/// Asks a running [`Server`] to stop gracefully. Cloneable; firing it twice is harmless.
#[derive(Clone)]
pub struct ShutdownHandle(Arc<watch::Sender<bool>>);

impl ShutdownHandle {
    /// Stops accepting connections and requests (a request on a connection still open gets
    /// 503); requests already queued are still answered and running streams finish, then
    /// [`Server::run`] returns.
    pub fn shutdown(&self) {
        self.0.send_replace(true);
    }
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    app: Arc<api::App>,
    max_body_bytes: usize,
    stop: ShutdownHandle,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port: see [`Server::local_addr`]) and starts the queue
    /// worker, which owns `embedder` from now on. An embedding server only.
    pub async fn bind(addr: impl ToSocketAddrs, embedder: impl Embedder, config: ServerConfig) -> std::io::Result<Server> {
        Server::bind_with(addr, Some(Box::new(embedder) as Box<dyn Embedder>), None, config, GenConfig::default()).await
    }

    /// Binds a server with an embedder, a generator, or both (neither is `InvalidInput`);
    /// `generation` bounds the generator's sessions. The endpoints of a missing one answer 404.
    pub async fn bind_with(
        addr: impl ToSocketAddrs,
        embedder: Option<Box<dyn Embedder>>,
        generator: Option<Arc<dyn Generator>>,
        config: ServerConfig,
        generation: GenConfig,
    ) -> std::io::Result<Server> {
        if embedder.is_none() && generator.is_none() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "a server needs an embedder, a generator, or both"));
        }
        let listener = TcpListener::bind(addr).await?;
        let metrics = Arc::new(Metrics::default());
        let queue = embedder.map(|e| BatchQueue::start(e, config.queue, metrics.clone())).transpose()?;
        let generation = generator.map(|generator| completions::Generation { info: generator.info(), generator, admission: admission::Admission::new(generation) });
        let app = Arc::new(api::App { queue, generation, metrics, api_key: config.api_key });
        Ok(Server { listener, app, max_body_bytes: config.max_body_bytes, stop: ShutdownHandle(Arc::new(watch::channel(false).0)) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.stop.clone()
    }

    /// Serves until the shutdown handle fires, then stops accepting, answers every request
    /// already accepted (running generation streams run to their end), stops the queue worker
    /// and returns.
    pub async fn run(self) -> std::io::Result<()> {
        let Server { listener, app, max_body_bytes, stop } = self;
        let router = api::router(app.clone(), max_body_bytes);
        let mut stopped = stop.0.subscribe();
        let draining = app.clone();
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|s| *s).await;
                // New requests on connections still open get 503; queued ones still run.
                if let Some(queue) = &draining.queue {
                    queue.close();
                }
                if let Some(g) = &draining.generation {
                    g.admission.close();
                }
            })
            .await?;
        // Every connection is done, so every accepted request has its answer; the worker
        // has nothing left and stops.
        tokio::task::spawn_blocking(move || {
            if let Some(queue) = &app.queue {
                queue.close_and_join();
            }
        })
        .await
        .map_err(std::io::Error::other)
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
}

/// Runs an embedding server on its own runtime until SIGINT/SIGTERM (the `nx-vulkan serve`
/// command); `ready` is told the bound address once it accepts connections. A second signal
/// while draining exits the process at once.
pub fn serve_until_signal(addr: SocketAddr, embedder: impl Embedder, config: ServerConfig, ready: impl FnOnce(SocketAddr)) -> std::io::Result<()> {
    serve_until_signal_with(addr, Some(Box::new(embedder) as Box<dyn Embedder>), None, config, GenConfig::default(), ready)
}

/// [`serve_until_signal`] for a server with an embedder, a generator, or both (see
/// [`Server::bind_with`]).
pub fn serve_until_signal_with(
    addr: SocketAddr,
    embedder: Option<Box<dyn Embedder>>,
    generator: Option<Arc<dyn Generator>>,
    config: ServerConfig,
    generation: GenConfig,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("nx-vulkan-http").build()?;
    runtime.block_on(async move {
        let server = Server::bind_with(addr, embedder, generator, config, generation).await?;
        ready(server.local_addr());
        let stop = server.shutdown_handle();
        tokio::spawn(async move {
            shutdown_signal().await;
            stop.shutdown();
            shutdown_signal().await;
            eprintln!("nx-vulkan: second signal, exiting without draining");
            std::process::exit(130);
        });
        server.run().await
    })
}
