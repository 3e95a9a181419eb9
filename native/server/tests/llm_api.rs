//! The generation endpoints end to end on loopback, with the fake generator (and the fake
//! embedder where a test needs both).

mod common;

use common::generator::*;
use common::*;
use nx_vulkan_server::{GenConfig, GenPrompt, QueueConfig, ServerConfig};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;

fn config() -> ServerConfig {
    ServerConfig { queue: QueueConfig { batch: 8, max_wait: Duration::from_millis(2), capacity: 64 }, api_key: None, max_body_bytes: 16 << 10 }
}

fn gen_config(max_sessions: usize, queue: usize) -> GenConfig {
    GenConfig { max_sessions, queue }
}

async fn start_llm(fake: &FakeGenerator, generation: GenConfig) -> Running {
    start_with(None, Some(fake.clone()), config(), generation).await
}

async fn post(addr: SocketAddr, path: &str, body: &Value) -> Reply {
    request(addr, "POST", path, &[], body.to_string().as_bytes()).await
}

/// Waits (bounded) until `cond` holds.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{what}: not within 10 s");
}

/// The chunks of a stream, checked to end with `[DONE]`.
fn chunks(r: &Reply) -> Vec<Value> {
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("content-type").unwrap().starts_with("text/event-stream"), "{:?}", r.headers);
    let events = r.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{events:?}");
    events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap_or_else(|err| panic!("{err}: {e}"))).collect()
}

/// A chat stream's text and finish reason, with every chunk's shape checked.
fn chat_stream_text(chunks: &[Value]) -> (String, String) {
    assert_eq!(chunks[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    let mut text = String::new();
    let mut finish = None;
    for c in chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], GEN_MODEL);
        assert_eq!(c["device"], GEN_DEVICE);
        assert_eq!(c["id"], chunks[0]["id"]);
        let Some(choice) = c["choices"].get(0) else { continue };
        assert!(finish.is_none(), "a chunk after the finish reason");
        text += choice["delta"]["content"].as_str().unwrap_or("");
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    (text, finish.expect("a finish reason"))
}

fn completion_stream_text(chunks: &[Value]) -> (String, String) {
    let mut text = String::new();
    let mut finish = None;
    for c in chunks {
        assert_eq!(c["object"], "text_completion");
        assert_eq!(c["model"], GEN_MODEL);
        assert_eq!(c["device"], GEN_DEVICE);
        let Some(choice) = c["choices"].get(0) else { continue };
        assert!(finish.is_none(), "a chunk after the finish reason");
        text += choice["text"].as_str().unwrap();
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    (text, finish.expect("a finish reason"))
}

/// The server still answers a good request correctly.
async fn still_serving(addr: SocketAddr) {
    let r = post(addr, "/v1/completions", &json!({"prompt": "still here", "max_tokens": 2})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["choices"][0]["text"], fake_text("here", 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_answer_the_openai_shape() {
    let fake = FakeGenerator::new(0, 8);
    let s = start_llm(&fake, GenConfig::default()).await;
    let r = post(s.addr, "/v1/completions", &json!({"model": GEN_MODEL, "prompt": "say hello"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let a = r.json();
    assert_eq!(a["object"], "text_completion");
    assert!(a["id"].as_str().unwrap().starts_with("cmpl-"));
    assert_eq!(a["model"], GEN_MODEL);
    assert_eq!(a["device"], GEN_DEVICE);
    assert!(a["system_fingerprint"].as_str().unwrap().starts_with("nx_vulkan-"));
    assert!(a["created"].as_u64().unwrap() > 0);
    assert_eq!(a["choices"][0], json!({"index": 0, "text": fake_text("hello", 8), "logprobs": null, "finish_reason": "stop"}));
    assert_eq!(a["usage"], json!({"prompt_tokens": 2, "completion_tokens": 8, "total_tokens": 10}));
    // max_tokens below the fake's own length: cut, finish_reason "length".
    let r = post(s.addr, "/v1/completions", &json!({"prompt": ["one prompt in a list"], "max_tokens": 3})).await;
    let a = r.json();
    assert_eq!(a["choices"][0]["text"], fake_text("list", 3));
    assert_eq!(a["choices"][0]["finish_reason"], "length");
    assert_eq!(a["usage"]["completion_tokens"], 3);
    // A stop string: the text up to it, without it, finish_reason "stop".
    let r = post(s.addr, "/v1/completions", &json!({"prompt": "x", "stop": "x-3"})).await;
    let a = r.json();
    assert_eq!(a["choices"][0]["text"], fake_text("x", 3));
    assert_eq!(a["choices"][0]["finish_reason"], "stop");
    assert_eq!(fake.last().1.stop, vec!["x-3".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_parameters_reach_the_generator() {
    let fake = FakeGenerator::new(0, 4);
    let s = start_llm(&fake, GenConfig::default()).await;
    let body = json!({
        "prompt": "p", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
        "repeat_penalty": 1.1, "seed": 42, "stop": ["a", "b"], "frequency_penalty": 0, "presence_penalty": 0.0, "n": 1, "user": "ignored"
    });
    let r = post(s.addr, "/v1/completions", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (prompt, p) = fake.last();
    assert_eq!(prompt, GenPrompt::Text("p".into()));
    assert_eq!((p.max_tokens, p.temperature, p.top_p, p.top_k, p.min_p, p.repeat_penalty), (7, 0.5, 0.9, 40, 0.05, 1.1));
    assert_eq!((p.seed, p.stop.clone(), p.logprobs), (Some(42), vec!["a".to_string(), "b".to_string()], None));
    // Defaults: OpenAI's, max_tokens 256.
    post(s.addr, "/v1/completions", &json!({"prompt": "q"})).await;
    assert_eq!(fake.last().1, nx_vulkan_server::GenParams::default());
    // Chat: max_completion_tokens, messages flattened from text parts.
    let body = json!({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}], "max_completion_tokens": 5});
    let r = post(s.addr, "/v1/chat/completions", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (prompt, p) = fake.last();
    let GenPrompt::Chat(messages) = prompt else { panic!("a chat prompt") };
    assert_eq!(messages.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect::<Vec<_>>(), vec![("system", "be brief"), ("user", "hi there")]);
    assert_eq!(p.max_tokens, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_answer_the_openai_shape() {
    let fake = FakeGenerator::new(0, 6);
    let s = start_llm(&fake, GenConfig::default()).await;
    let body = json!({"model": GEN_MODEL, "messages": [{"role": "user", "content": "tell me"}]});
    let a = post(s.addr, "/v1/chat/completions", &body).await.json();
    assert_eq!(a["object"], "chat.completion");
    assert!(a["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(a["model"], GEN_MODEL);
    assert_eq!(a["device"], GEN_DEVICE);
    assert_eq!(a["choices"][0], json!({"index": 0, "message": {"role": "assistant", "content": fake_text("me", 6)}, "logprobs": null, "finish_reason": "stop"}));
    assert_eq!(a["usage"], json!({"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}));
    let body = json!({"messages": [{"role": "user", "content": "tell me"}], "max_tokens": 2});
    let a = post(s.addr, "/v1/chat/completions", &body).await.json();
    assert_eq!(a["choices"][0]["message"]["content"], fake_text("me", 2));
    assert_eq!(a["choices"][0]["finish_reason"], "length");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_server_sent_events() {
    let fake = FakeGenerator::new(1, 5);
    let s = start_llm(&fake, GenConfig::default()).await;
    // Chat, with usage as a last chunk without choices.
    let body = json!({"messages": [{"role": "user", "content": "go"}], "stream": true, "stream_options": {"include_usage": true}});
    let c = chunks(&post(s.addr, "/v1/chat/completions", &body).await);
    assert_eq!(chat_stream_text(&c), (fake_text("go", 5), "stop".into()));
    // role chunk + 5 tokens + finish + usage
    assert_eq!(c.len(), 8, "{c:?}");
    let last = c.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"], json!({"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}));
    // Without include_usage there is no usage chunk; length passes through.
    let body = json!({"messages": [{"role": "user", "content": "go"}], "stream": true, "max_tokens": 2});
    let c = chunks(&post(s.addr, "/v1/chat/completions", &body).await);
    assert_eq!(chat_stream_text(&c), (fake_text("go", 2), "length".into()));
    assert!(c.iter().all(|c| c.get("usage").is_none()), "{c:?}");
    // Completions: a chunk per token, then the finish reason; a stop string passes through.
    let body = json!({"prompt": "run", "stream": true, "stop": ["run-2"]});
    let c = chunks(&post(s.addr, "/v1/completions", &body).await);
    assert_eq!(completion_stream_text(&c), (fake_text("run", 2), "stop".into()));
    let body = json!({"prompt": "run", "stream": true, "max_tokens": 4, "stream_options": {"include_usage": true}});
    let c = chunks(&post(s.addr, "/v1/completions", &body).await);
    assert_eq!(completion_stream_text(&c), (fake_text("run", 4), "length".into()));
    assert_eq!(c.last().unwrap()["usage"]["completion_tokens"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logprobs_come_in_both_shapes() {
    let fake = FakeGenerator::new(0, 3);
    let s = start_llm(&fake, GenConfig::default()).await;
    let a = post(s.addr, "/v1/completions", &json!({"prompt": "k", "logprobs": 2})).await.json();
    assert_eq!(fake.last().1.logprobs, Some(2));
    let lp = &a["choices"][0]["logprobs"];
    assert_eq!(lp["tokens"], json!(["k-0 ", "k-1 ", "k-2 "]));
    assert_eq!(lp["token_logprobs"], json!([fake_logprob(0), fake_logprob(1), fake_logprob(2)]));
    assert_eq!(lp["text_offset"], json!([0, 4, 8]));
    assert_eq!(lp["top_logprobs"][1], json!({"alt0": fake_logprob(1) - 1.0, "alt1": fake_logprob(1) - 2.0}));
    let body = json!({"messages": [{"role": "user", "content": "k"}], "logprobs": true, "top_logprobs": 1});
    let a = post(s.addr, "/v1/chat/completions", &body).await.json();
    let content = &a["choices"][0]["logprobs"]["content"];
    assert_eq!(content[0], json!({"token": "k-0 ", "logprob": fake_logprob(0), "bytes": b"k-0 ".to_vec(), "top_logprobs": [{"token": "alt0", "logprob": fake_logprob(0) - 1.0, "bytes": b"alt0".to_vec()}]}));
    assert_eq!(content.as_array().unwrap().len(), 3);
    // Streaming: each token's chunk carries its own.
    let body = json!({"prompt": "k", "logprobs": 0, "stream": true});
    let c = chunks(&post(s.addr, "/v1/completions", &body).await);
    assert_eq!(c[1]["choices"][0]["logprobs"]["text_offset"], json!([4]));
    assert_eq!(c[1]["choices"][0]["logprobs"]["token_logprobs"], json!([fake_logprob(1)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_streams_all_answered_correctly() {
    let fake = FakeGenerator::new(2, 12);
    let s = start_llm(&fake, gen_config(8, 64)).await;
    let clients: Vec<_> = (0..32)
        .map(|c| {
            let addr = s.addr;
            tokio::spawn(async move {
                if c % 2 == 0 {
                    let body = json!({"messages": [{"role": "user", "content": format!("client c{c}")}], "stream": true, "max_tokens": 4 + c % 9});
                    let got = chat_stream_text(&chunks(&post(addr, "/v1/chat/completions", &body).await));
                    let n = (4 + c % 9).min(12);
                    assert_eq!(got, (fake_text(&format!("c{c}"), n), if n < 12 { "length" } else { "stop" }.into()), "client {c}");
                } else {
                    let body = json!({"prompt": format!("client c{c}"), "stream": true});
                    let got = completion_stream_text(&chunks(&post(addr, "/v1/completions", &body).await));
                    assert_eq!(got, (fake_text(&format!("c{c}"), 12), "stop".into()), "client {c}");
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    assert_eq!(fake.started(), 32);
    assert!(fake.most_open() <= 8, "{} sessions at once, 8 allowed", fake.most_open());
    assert_eq!(fake.cancelled(), 0);
    let m = metrics(s.addr).await;
    assert_eq!(metric(&m, "nx_vulkan_requests_total{route=\"/v1/chat/completions\",status=\"200\"}"), 16.0);
    assert_eq!(metric(&m, "nx_vulkan_requests_total{route=\"/v1/completions\",status=\"200\"}"), 16.0);
    assert_eq!(metric(&m, "nx_vulkan_time_to_first_token_seconds_count"), 32.0);
    let want_tokens: usize = (0..32).map(|c| if c % 2 == 0 { (4 + c % 9).min(12) } else { 12 }).sum();
    assert_eq!(metric(&m, "nx_vulkan_generated_tokens_total"), want_tokens as f64);
    assert_eq!(metric(&m, "nx_vulkan_generations_total{finish_reason=\"stop\"}") + metric(&m, "nx_vulkan_generations_total{finish_reason=\"length\"}"), 32.0);
    eventually("every session closed", || fake.open() == 0).await;
    assert_eq!(metric(&metrics(s.addr).await, "nx_vulkan_generation_active_sessions"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_gives_503_with_retry_after_and_answers_every_accepted_request() {
    let fake = FakeGenerator::new(30, 6);
    let s = start_llm(&fake, gen_config(2, 2)).await;
    let clients: Vec<_> = (0..16)
        .map(|c| {
            let addr = s.addr;
            tokio::spawn(async move { (c, post(addr, "/v1/completions", &json!({"prompt": format!("load l{c}")})).await) })
        })
        .collect();
    let (mut ok, mut busy) = (0, 0);
    for c in clients {
        let (c, r) = c.await.unwrap();
        match r.status {
            200 => {
                assert_eq!(r.json()["choices"][0]["text"], fake_text(&format!("l{c}"), 6));
                ok += 1;
            }
            503 => {
                r.assert_overloaded();
                busy += 1;
            }
            other => panic!("status {other}: {}", r.text()),
        }
    }
    assert!(ok >= 4 && busy >= 1, "ok {ok}, busy {busy}");
    assert_eq!(ok + busy, 16);
    assert!(fake.most_open() <= 2);
    let m = metrics(s.addr).await;
    assert_eq!(metric(&m, "nx_vulkan_requests_total{route=\"/v1/completions\",status=\"503\"}"), busy as f64);
    assert_eq!(metric(&m, "nx_vulkan_generations_total{finish_reason=\"stop\"}"), ok as f64);
    // The generator's own refusals: busy → 503, too long → 400.
    let r = post(s.addr, "/v1/completions", &json!({"prompt": "__busy__"})).await;
    assert_eq!((r.status, r.header("retry-after")), (503, Some("1")));
    let r = post(s.addr, "/v1/chat/completions", &json!({"messages": [{"role": "user", "content": "__long__"}]})).await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("longer than the context"));
    still_serving(s.addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_cancels_its_session() {
    let fake = FakeGenerator::new(10, 400);
    let s = start_llm(&fake, gen_config(4, 4)).await;
    let body = json!({"prompt": "long", "stream": true, "max_tokens": 400}).to_string();
    let read = read_events_and_drop(s.addr, "/v1/completions", body.as_bytes(), 3).await;
    assert!(read.contains("long-0 "), "{read}");
    eventually("the fake sees the cancellation", || fake.cancelled() == 1).await;
    // It stopped long before its 400 tokens.
    let sent = fake.record.tokens_sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(sent < 100, "{sent} tokens sent after the client left");
    eventually("the session closed", || fake.open() == 0).await;
    let m = metrics(s.addr).await;
    assert_eq!(metric(&m, "nx_vulkan_generations_total{finish_reason=\"client_gone\"}"), 1.0, "{m}");
    assert_eq!(metric(&m, "nx_vulkan_generation_active_sessions"), 0.0, "{m}");
    // A non-streaming request whose client leaves (once its session has started) is cancelled too.
    let body = json!({"messages": [{"role": "user", "content": "bye"}]}).to_string();
    let mut client = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut client, &request_bytes("POST", "/v1/chat/completions", &[], body.as_bytes())).await.unwrap();
    eventually("the second session starts", || fake.started() == 2).await;
    drop(client);
    eventually("the second cancellation", || fake.cancelled() == 2).await;
    still_serving(s.addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_400_and_the_server_keeps_serving() {
    let fake = FakeGenerator::new(0, 3);
    let s = start_llm(&fake, GenConfig::default()).await;
    let user = json!([{"role": "user", "content": "hi"}]);
    let completions: Vec<(Value, u16, &str)> = vec![
        (json!({}), 400, "missing field `prompt`"),
        (json!({"prompt": 7}), 400, "prompt must be a string"),
        (json!({"prompt": [1, 2]}), 400, "token arrays"),
        (json!({"prompt": ["a", "b"]}), 400, "one prompt"),
        (json!({"prompt": "x", "max_tokens": 0}), 400, "max_tokens"),
        (json!({"prompt": "x", "max_tokens": CONTEXT + 1}), 400, "context length"),
        (json!({"prompt": "x", "temperature": 2.5}), 400, "temperature"),
        (json!({"prompt": "x", "temperature": "hot"}), 400, "invalid JSON"),
        (json!({"prompt": "x", "top_p": 0}), 400, "top_p"),
        (json!({"prompt": "x", "top_k": -1}), 400, "top_k"),
        (json!({"prompt": "x", "min_p": 1.5}), 400, "min_p"),
        (json!({"prompt": "x", "repeat_penalty": 0}), 400, "repeat_penalty"),
        (json!({"prompt": "x", "frequency_penalty": 0.5}), 400, "use repeat_penalty"),
        (json!({"prompt": "x", "presence_penalty": -1}), 400, "use repeat_penalty"),
        (json!({"prompt": "x", "stop": 3}), 400, "stop must be"),
        (json!({"prompt": "x", "stop": [""]}), 400, "empty stop"),
        (json!({"prompt": "x", "logprobs": 21}), 400, "logprobs"),
        (json!({"prompt": "x", "n": 2}), 400, "n:"),
        (json!({"prompt": "x", "echo": true}), 400, "echo"),
        (json!({"prompt": "x", "logit_bias": {"1": 5}}), 400, "logit_bias"),
        (json!({"prompt": "x", "model": "other"}), 404, "not served"),
    ];
    for (body, status, says) in &completions {
        let r = post(s.addr, "/v1/completions", body).await;
        assert_eq!(r.status, *status, "{body}: {}", r.text());
        assert!(r.json()["error"]["message"].as_str().unwrap().contains(says), "{body}: {}", r.text());
        assert!(r.json()["error"]["type"].is_string());
    }
    let chats: Vec<(Value, &str)> = vec![
        (json!({"messages": []}), "empty"),
        (json!({"messages": [{"content": "hi"}]}), "no role"),
        (json!({"messages": [{"role": "tool", "content": "hi"}]}), "role"),
        (json!({"messages": [{"role": "user", "content": 5}]}), "content"),
        (json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}), "text content"),
        (json!({"messages": user, "top_logprobs": 2}), "needs logprobs"),
        (json!({"messages": user, "logprobs": true, "top_logprobs": 50}), "logprobs"),
        (json!({"messages": user, "tools": [{"type": "function"}]}), "tools"),
        (json!({"messages": user, "response_format": {"type": "json_object"}}), "response_format"),
    ];
    for (body, says) in &chats {
        let r = post(s.addr, "/v1/chat/completions", body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert!(r.json()["error"]["message"].as_str().unwrap().contains(says), "{body}: {}", r.text());
    }
    for raw in [&b"{\"prompt\": \"unterminated"[..], b"not json"] {
        let r = request(s.addr, "POST", "/v1/completions", &[], raw).await;
        assert_eq!(r.status, 400);
        assert!(r.json()["error"]["message"].as_str().unwrap().contains("invalid JSON"));
    }
    let big = format!("{{\"prompt\": \"{}\"}}", "x".repeat(64 << 10));
    assert_eq!(request(s.addr, "POST", "/v1/chat/completions", &[], big.as_bytes()).await.status, 413);
    assert_eq!(fake.started(), 0, "a bad request reached the generator");
    still_serving(s.addr).await;
    // A session that fails: 500 when not streaming; an error event then [DONE] when streaming.
    let r = post(s.addr, "/v1/completions", &json!({"prompt": "__error__"})).await;
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("asked to fail"));
    let r = post(s.addr, "/v1/chat/completions", &json!({"messages": [{"role": "user", "content": "__error__"}], "stream": true})).await;
    let events = r.events();
    assert_eq!(events.last().unwrap(), "[DONE]");
    let error: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("asked to fail"), "{events:?}");
    still_serving(s.addr).await;
    let m = metrics(s.addr).await;
    assert_eq!(metric(&m, "nx_vulkan_requests_total{route=\"/v1/completions\",status=\"400\"}"), 22.0);
    assert_eq!(metric(&m, "nx_vulkan_generations_total{finish_reason=\"error\"}"), 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_serves_what_it_was_started_with() {
    // Generator only: embeddings are 404 with a clear message; /health and /metrics work.
    let fake = FakeGenerator::new(0, 2);
    let s = start_llm(&fake, GenConfig::default()).await;
    let r = embed(s.addr, &json!({"input": "x"})).await;
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("without an embedding model"), "{}", r.text());
    let models = request(s.addr, "GET", "/v1/models", &[], b"").await.json();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"].as_array().unwrap().len(), 1);
    assert_eq!(models["data"][0]["id"], GEN_MODEL);
    assert_eq!(models["data"][0]["device"], GEN_DEVICE);
    assert_eq!(models["data"][0]["context_length"], CONTEXT);
    assert_eq!(models["data"][0]["activations"], "f32");
    let h = request(s.addr, "GET", "/health", &[], b"").await.json();
    assert_eq!(h["status"], "ok");
    assert_eq!(h["generator"]["model"], GEN_MODEL);
    assert!(h.get("queue_depth").is_none(), "{h}");
    let m = metrics(s.addr).await;
    assert!(m.contains("nx_vulkan_generator_info{model=\"fake-llm\",device=\"fake gpu\",quantization=\"Q4_1\",activations=\"f32\",context_length=\"4096\"} 1"), "{m}");
    assert!(!m.contains("nx_vulkan_model_info"), "{m}");
    // Embedder only: the generation endpoints are 404.
    let s = start(FakeEmbedder::new(0), config()).await;
    for path in ["/v1/completions", "/v1/chat/completions"] {
        let r = post(s.addr, path, &json!({"prompt": "x", "messages": []})).await;
        assert_eq!(r.status, 404, "{path}");
        assert!(r.json()["error"]["message"].as_str().unwrap().contains("without a language model"), "{}", r.text());
    }
    let models = request(s.addr, "GET", "/v1/models", &[], b"").await.json();
    assert_eq!(models["data"][0]["id"], "fake-minilm");
    assert!(request(s.addr, "GET", "/health", &[], b"").await.json().get("generator").is_none());
    // Both: each endpoint works, /v1/models lists both, and naming the embedding model for
    // generation says so.
    let s = start_with(Some(FakeEmbedder::new(0)), Some(FakeGenerator::new(0, 2)), config(), GenConfig::default()).await;
    assert_eq!(vectors(&embed(s.addr, &json!({"input": "both"})).await.json()), vec![fake_vector("both")]);
    still_serving(s.addr).await;
    let ids: Vec<Value> = request(s.addr, "GET", "/v1/models", &[], b"").await.json()["data"].as_array().unwrap().iter().map(|m| m["id"].clone()).collect();
    assert_eq!(ids, vec![json!("fake-minilm"), json!(GEN_MODEL)]);
    let r = post(s.addr, "/v1/completions", &json!({"prompt": "x", "model": "fake-minilm"})).await;
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("embedding model"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_is_required_when_set() {
    let fake = FakeGenerator::new(0, 2);
    let s = start_with(None, Some(fake.clone()), ServerConfig { api_key: Some("sesame".into()), ..config() }, GenConfig::default()).await;
    let body = json!({"prompt": "secret", "stream": true}).to_string();
    for (method, path) in [("POST", "/v1/completions"), ("POST", "/v1/chat/completions"), ("GET", "/v1/models")] {
        for auth in [None, Some("Bearer wrong")] {
            let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
            let r = request(s.addr, method, path, &headers, body.as_bytes()).await;
            assert_eq!(r.status, 401, "{path} {auth:?}");
            assert_eq!(r.json()["error"]["type"], "authentication_error");
        }
    }
    let r = request(s.addr, "POST", "/v1/completions", &[("Authorization", "Bearer sesame")], body.as_bytes()).await;
    assert_eq!(completion_stream_text(&chunks(&r)), (fake_text("secret", 2), "stop".into()));
    assert_eq!(fake.started(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_running_streams() {
    let fake = FakeGenerator::new(40, 8);
    let s = start_llm(&fake, gen_config(4, 4)).await;
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let addr = s.addr;
            tokio::spawn(async move {
                let body = json!({"messages": [{"role": "user", "content": format!("late s{c}")}], "stream": true});
                (c, post(addr, "/v1/chat/completions", &body).await)
            })
        })
        .collect();
    eventually("every stream started", || fake.started() == 4).await;
    s.stop.shutdown();
    for c in clients {
        let (c, r) = c.await.unwrap();
        assert_eq!(chat_stream_text(&chunks(&r)), (fake_text(&format!("s{c}"), 8), "stop".into()));
    }
    tokio::time::timeout(Duration::from_secs(10), s.done).await.expect("the server stops").unwrap().unwrap();
    assert!(tokio::net::TcpStream::connect(s.addr).await.is_err(), "still accepting after shutdown");
    assert_eq!(fake.cancelled(), 0);
}
