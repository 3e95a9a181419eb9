//! The HTTP server end to end on loopback, with the fake embedder.

mod common;

use common::*;
use nx_vulkan_server::{QueueConfig, ServerConfig};
use serde_json::json;
use std::time::Duration;

fn config(batch: usize, capacity: usize) -> ServerConfig {
    ServerConfig { queue: QueueConfig { batch, max_wait: Duration::from_millis(2), capacity }, api_key: None, max_body_bytes: 16 << 10 }
}

/// The server still answers a good request correctly.
async fn still_serving(addr: std::net::SocketAddr) {
    let r = embed(addr, &json!({"input": "still here"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(vectors(&r.json()), vec![fake_vector("still here")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_the_openai_shape() {
    let fake = FakeEmbedder::new(0);
    let s = start(fake, config(32, 1024)).await;
    let long = "word ".repeat(40);
    let r = embed(s.addr, &json!({"input": ["hello world", long], "model": "fake-minilm", "encoding_format": "float"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("content-type").unwrap().starts_with("application/json"));
    let a = r.json();
    assert_eq!(a["object"], "list");
    assert_eq!(a["model"], "fake-minilm");
    assert_eq!(a["device"], "fake device");
    assert_eq!(a["precision"], "fp32");
    assert_eq!(a["truncated"], json!([1]));
    assert_eq!(a["usage"], json!({"prompt_tokens": 4 + MAX_TOKENS, "total_tokens": 4 + MAX_TOKENS}));
    assert_eq!(a["data"][0]["object"], "embedding");
    assert_eq!(a["data"][1]["index"], 1);
    assert_eq!(vectors(&a), vec![fake_vector("hello world"), fake_vector(&long)]);
    // A single string is one input.
    let r = embed(s.addr, &json!({"input": "one"})).await;
    assert_eq!(vectors(&r.json()), vec![fake_vector("one")]);
    // base64: the vector's little-endian f32 bytes.
    let r = embed(s.addr, &json!({"input": ["b64"], "encoding_format": "base64"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let b64 = r.json()["data"][0]["embedding"].as_str().unwrap().to_string();
    assert_eq!(decode_f32_base64(&b64), fake_vector("b64"));
    // /health
    let h = request(s.addr, "GET", "/health", &[], b"").await.json();
    assert_eq!(h["status"], "ok");
    assert_eq!(h["model"], "fake-minilm");
    assert_eq!(h["device"], "fake device");
    assert_eq!(h["precision"], "fp32");
    assert_eq!(h["queue_depth"], 0);
    s.stop.shutdown();
    s.done.await.unwrap().unwrap();
}

fn decode_f32_base64(s: &str) -> Vec<f32> {
    let value = |c: u8| b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".iter().position(|x| *x == c).unwrap() as u32;
    let mut bytes = vec![];
    for chunk in s.as_bytes().chunks(4) {
        let pad = chunk.iter().filter(|c| **c == b'=').count();
        let n = chunk.iter().fold(0, |n, c| n << 6 | if *c == b'=' { 0 } else { value(*c) });
        bytes.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
    }
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_clients_all_answered_correctly() {
    let fake = FakeEmbedder::new(3);
    let batches = fake.batches.clone();
    let s = start(fake, config(8, 1024)).await;
    let clients: Vec<_> = (0..64)
        .map(|c| {
            let addr = s.addr;
            tokio::spawn(async move {
                let texts: Vec<String> = (0..1 + c % 5).map(|i| format!("client {c} text {i}")).collect();
                let r = embed(addr, &json!({"input": texts})).await;
                assert_eq!(r.status, 200, "{}", r.text());
                let want: Vec<Vec<f32>> = texts.iter().map(|t| fake_vector(t)).collect();
                assert_eq!(vectors(&r.json()), want, "client {c}");
                texts.len()
            })
        })
        .collect();
    let mut inputs = 0;
    for c in clients {
        inputs += c.await.unwrap();
    }
    let batches = batches.lock().clone();
    assert_eq!(batches.iter().sum::<usize>(), inputs);
    assert!(batches.iter().all(|b| *b <= 8), "a batch over the limit: {batches:?}");
    assert!(batches.iter().any(|b| *b > 1), "no batching happened: {batches:?}");
    let m = metrics(s.addr).await;
    assert_eq!(metric(&m, "nx_vulkan_requests_total{route=\"/v1/embeddings\",status=\"200\"}"), 64.0);
    assert_eq!(metric(&m, "nx_vulkan_inputs_total"), inputs as f64);
    assert_eq!(metric(&m, "nx_vulkan_batch_size_count"), batches.len() as f64);
    s.stop.shutdown();
    s.done.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_split_over_batches_is_answered_in_order() {
    let fake = FakeEmbedder::new(0);
    let batches = fake.batches.clone();
    let s = start(fake, config(4, 1024)).await;
    let texts: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    let r = embed(s.addr, &json!({"input": texts})).await;
    assert_eq!(vectors(&r.json()), texts.iter().map(|t| fake_vector(t)).collect::<Vec<_>>());
    assert_eq!(*batches.lock(), vec![4, 4, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_gives_503_with_retry_after_and_answers_every_accepted_request() {
    let s = start(FakeEmbedder::new(40), config(1, 3)).await;
    let clients: Vec<_> = (0..24)
        .map(|c| {
            let addr = s.addr;
            tokio::spawn(async move { (c, embed(addr, &json!({"input": [format!("load {c}")]})).await) })
        })
        .collect();
    let (mut ok, mut busy) = (0, 0);
    for c in clients {
        let (c, r) = c.await.unwrap();
        match r.status {
            200 => {
                assert_eq!(vectors(&r.json()), vec![fake_vector(&format!("load {c}"))]);
                ok += 1;
            }
            503 => {
                r.assert_overloaded();
                busy += 1;
            }
            other => panic!("status {other}: {}", r.text()),
        }
    }
    assert!(ok >= 3 && busy >= 1, "ok {ok}, busy {busy}");
    let m = metrics(s.addr).await;
    assert_eq!(metric(&m, "nx_vulkan_requests_total{route=\"/v1/embeddings\",status=\"503\"}"), busy as f64);
    assert_eq!(metric(&m, "nx_vulkan_inputs_total"), ok as f64);
    // A request larger than the whole queue can never fit: 400, not 503.
    let r = embed(s.addr, &json!({"input": ["a", "b", "c", "d"]})).await;
    assert_eq!(r.status, 400, "{}", r.text());
    still_serving(s.addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_and_the_server_keeps_serving() {
    let s = start(FakeEmbedder::new(0), config(32, 1024)).await;
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"{\"input\": [\"unterminated".to_vec(), 400, "invalid JSON"),
        (b"not json".to_vec(), 400, "invalid JSON"),
        (br#"{"model": "fake-minilm"}"#.to_vec(), 400, "missing field `input`"),
        (br#"{"input": []}"#.to_vec(), 400, "empty"),
        (br#"{"input": [[1, 2, 3]]}"#.to_vec(), 400, "token arrays"),
        (br#"{"input": 7}"#.to_vec(), 400, "string"),
        (br#"{"input": "x", "dimensions": 0}"#.to_vec(), 400, "dimensions"),
        (br#"{"input": "x", "dimensions": 9}"#.to_vec(), 400, "dimensions"),
        (br#"{"input": "x", "encoding_format": "hex"}"#.to_vec(), 400, "encoding_format"),
        (br#"{"input": "x", "model": "other"}"#.to_vec(), 404, "not served"),
        (format!("{{\"input\": \"{}\"}}", "x".repeat(64 << 10)).into_bytes(), 413, ""),
    ];
    for (body, status, says) in cases {
        let r = request(s.addr, "POST", "/v1/embeddings", &[], &body).await;
        assert_eq!(r.status, status, "{}", r.text());
        let e = r.json();
        assert!(e["error"]["message"].as_str().unwrap().contains(says), "{e}");
        assert!(e["error"]["type"].is_string(), "{e}");
        still_serving(s.addr).await;
    }
    let r = request(s.addr, "GET", "/nowhere", &[], b"").await;
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["message"].is_string());
    // The embedder failing or panicking fails that request only.
    for poison in ["__fail__", "__panic__"] {
        let r = embed(s.addr, &json!({"input": ["fine", poison]})).await;
        assert_eq!(r.status, 500, "{}", r.text());
        assert_eq!(r.json()["error"]["type"], "server_error");
        still_serving(s.addr).await;
    }
    let m = metrics(s.addr).await;
    assert_eq!(metric(&m, "nx_vulkan_requests_total{route=\"/v1/embeddings\",status=\"400\"}"), 9.0);
    assert_eq!(metric(&m, "nx_vulkan_requests_total{route=\"/v1/embeddings\",status=\"413\"}"), 1.0);
    assert_eq!(metric(&m, "nx_vulkan_failed_batches_total"), 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_is_required_when_set() {
    let s = start(FakeEmbedder::new(0), ServerConfig { api_key: Some("sesame".into()), ..config(32, 1024) }).await;
    let body = json!({"input": "secret"}).to_string();
    for auth in [None, Some("Bearer wrong"), Some("sesame"), Some("Bearer sesam")] {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let r = request(s.addr, "POST", "/v1/embeddings", &headers, body.as_bytes()).await;
        assert_eq!(r.status, 401, "{auth:?}");
        assert_eq!(r.json()["error"]["type"], "authentication_error");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    }
    let r = request(s.addr, "POST", "/v1/embeddings", &[("Authorization", "Bearer sesame")], body.as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(vectors(&r.json()), vec![fake_vector("secret")]);
    // /health stays open for probes.
    assert_eq!(request(s.addr, "GET", "/health", &[], b"").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dimensions_truncates_and_renormalises() {
    let s = start(FakeEmbedder::new(0), config(32, 1024)).await;
    let texts = ["alpha", "beta gamma", "delta"];
    let r = embed(s.addr, &json!({"input": texts, "dimensions": 3})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    for (got, text) in vectors(&r.json()).iter().zip(texts) {
        let full = fake_vector(text);
        let norm = full[..3].iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        assert_eq!(got.len(), 3);
        for (g, f) in got.iter().zip(&full[..3]) {
            assert!((*g as f64 - *f as f64 / norm).abs() < 1e-6, "{got:?} vs {full:?}");
        }
        let unit = got.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        assert!((unit - 1.0).abs() < 1e-6, "norm {unit}");
    }
    // All the model's dimensions: the vector as it is (already unit norm).
    let r = embed(s.addr, &json!({"input": "alpha", "dimensions": DIMS})).await;
    let got = &vectors(&r.json())[0];
    for (g, f) in got.iter().zip(fake_vector("alpha")) {
        assert!((g - f).abs() < 1e-6);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_does_not_wedge_the_queue() {
    let s = start(FakeEmbedder::new(150), config(1, 16)).await;
    // One request keeps the worker busy; others queue behind it and their clients leave.
    let busy = {
        let addr = s.addr;
        tokio::spawn(async move { embed(addr, &json!({"input": "busy"})).await })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    for i in 0..3 {
        send_and_drop(s.addr, "/v1/embeddings", json!({"input": [format!("gone {i}"), "x"]}).to_string().as_bytes()).await;
    }
    let r = embed(s.addr, &json!({"input": "after"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(vectors(&r.json()), vec![fake_vector("after")]);
    assert_eq!(busy.await.unwrap().status, 200);
    still_serving(s.addr).await;
    let h = request(s.addr, "GET", "/health", &[], b"").await.json();
    assert_eq!(h["queue_depth"], 0);
    // The abandoned inputs were skipped, not run: only busy, after and still here ran. (A
    // request whose client left before its handler started was never queued at all.)
    let m = metrics(s.addr).await;
    assert_eq!(metric(&m, "nx_vulkan_inputs_total"), 3.0, "{m}");
    let abandoned = metric(&m, "nx_vulkan_abandoned_inputs_total");
    assert!(abandoned > 0.0 && abandoned % 2.0 == 0.0, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_answers_in_flight_requests() {
    let fake = FakeEmbedder::new(100);
    let batches = fake.batches.clone();
    let s = start(fake, config(2, 64)).await;
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let addr = s.addr;
            tokio::spawn(async move { (c, embed(addr, &json!({"input": format!("late {c}")})).await) })
        })
        .collect();
    // Wait until every request is accepted (queued or running), then stop. (A request not yet
    // sent when the server stops is refused, not "in flight": on a loaded machine the 6
    // connections can take seconds, so wait for them rather than for a fixed time.)
    let mut accepted = false;
    for _ in 0..6000 {
        let waiting = metric(&metrics(s.addr).await, "nx_vulkan_queue_depth") as usize;
        if waiting + batches.lock().iter().sum::<usize>() == 6 {
            accepted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(accepted, "the 6 requests were not all accepted within 30 s");
    s.stop.shutdown();
    for c in clients {
        let (c, r) = c.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(vectors(&r.json()), vec![fake_vector(&format!("late {c}"))]);
    }
    tokio::time::timeout(Duration::from_secs(10), s.done).await.expect("the server stops").unwrap().unwrap();
    assert!(tokio::net::TcpStream::connect(s.addr).await.is_err(), "still accepting after shutdown");
}
