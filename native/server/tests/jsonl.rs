//! The JSON-lines encode loop (`nx-vulkan encode`'s core) with the fake embedder, and its
//! agreement with the HTTP API.

mod common;

use common::*;
use nx_vulkan_server::{encode_lines, EncodeSummary, ServerConfig};
use serde_json::{json, Value};

fn encode(input: &str, batch: usize) -> (Vec<Value>, EncodeSummary) {
    let mut fake = FakeEmbedder::new(0);
    let mut out = vec![];
    let mut seen = vec![];
    let summary = encode_lines(&mut fake, input.as_bytes(), &mut out, batch, &mut |b| seen.push(b)).unwrap();
    assert_eq!(*seen.last().unwrap(), input.len() as u64);
    let lines = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (lines, summary)
}

#[test]
fn lines_in_order_with_ids_and_bad_lines_named() {
    let long = "w ".repeat(30);
    let input = format!("\"first\"\n\n{{\"text\": \"second\", \"id\": \"a-1\"}}\n{{\"text\": 5}}\nnot json\n{{\"id\": 3}}\n{{\"text\": \"{long}\", \"id\": 7}}\n   \n\"last\"");
    for batch in [1, 2, 32] {
        let (lines, summary) = encode(&input, batch);
        assert_eq!(summary, EncodeSummary { inputs: 4, bad_lines: 3, truncated: 1 });
        assert_eq!(lines.len(), 7, "{lines:?}");
        let text_of = ["first", "second", "", "", "", long.as_str(), "last"];
        for (i, (line, text)) in lines.iter().zip(text_of).enumerate() {
            if (2..5).contains(&i) {
                assert!(line["error"].is_string(), "{line}");
                continue;
            }
            let vector: Vec<f32> = line["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            assert_eq!(vector, fake_vector(text));
            assert_eq!(line["model"], "fake-minilm");
            assert_eq!(line["device"], "fake device");
            assert_eq!(line["precision"], "fp32");
            assert_eq!(line["tokens"], fake_output(text).tokens);
            assert_eq!(line["truncated"], fake_output(text).truncated);
        }
        let indexes: Vec<Value> = lines.iter().map(|l| l["index"].clone()).collect();
        assert_eq!(indexes, vec![json!(0), json!(1), Value::Null, Value::Null, Value::Null, json!(2), json!(3)]);
        assert!(lines[0].get("id").is_none());
        assert_eq!(lines[1]["id"], "a-1");
        assert_eq!(lines[5]["id"], 7);
        // Bad lines name their line (counted from 1, blank lines included).
        assert_eq!(lines[2]["line"], 4);
        assert!(lines[2]["error"].as_str().unwrap().contains("\"text\" must be a string"));
        assert_eq!(lines[3]["line"], 5);
        assert!(lines[3]["error"].as_str().unwrap().contains("invalid JSON"));
        assert_eq!(lines[4]["line"], 6);
    }
}

#[test]
fn an_embedder_failure_stops_the_loop_with_its_error() {
    let mut fake = FakeEmbedder::new(0);
    let err = encode_lines(&mut fake, "\"ok\"\n\"__fail__\"\n".as_bytes(), std::io::sink(), 8, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("the fake was asked to fail"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_output_equals_the_http_answer() {
    let texts: Vec<String> = (0..20).map(|i| format!("sentence number {i} {}", "pad ".repeat(i))).collect();
    let input: String = texts.iter().map(|t| json!(t).to_string() + "\n").collect();
    let (lines, _) = encode(&input, 6);
    let s = start(FakeEmbedder::new(0), ServerConfig::default()).await;
    let answer = embed(s.addr, &json!({"input": texts})).await.json();
    let data = answer["data"].as_array().unwrap();
    assert_eq!(lines.len(), data.len());
    for (line, item) in lines.iter().zip(data) {
        assert_eq!(line["index"], item["index"]);
        // Same JSON text, so the same f32 bits.
        assert_eq!(line["embedding"].to_string(), item["embedding"].to_string());
        assert_eq!(line["model"], answer["model"]);
        assert_eq!(line["device"], answer["device"]);
        assert_eq!(line["precision"], answer["precision"]);
    }
    let truncated: Vec<Value> = lines.iter().filter(|l| l["truncated"] == true).map(|l| l["index"].clone()).collect();
    assert_eq!(json!(truncated), answer["truncated"]);
    let tokens: u64 = lines.iter().map(|l| l["tokens"].as_u64().unwrap()).sum();
    assert_eq!(answer["usage"]["prompt_tokens"], tokens);
}
