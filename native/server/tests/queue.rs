//! The batching queue on its own (no HTTP): draining on close, abandoned requests.

mod common;

use common::*;
use nx_vulkan_server::{BatchQueue, Embedder, Metrics, QueueConfig, SubmitError};
use std::sync::Arc;

#[test]
fn closing_the_queue_answers_everything_accepted_and_refuses_the_rest() {
    let fake = FakeEmbedder::new(20);
    let queue = BatchQueue::start(fake, QueueConfig { batch: 2, capacity: 64, ..QueueConfig::default() }, Arc::new(Metrics::default())).unwrap();
    let receivers: Vec<_> = (0..7).map(|i| (i, queue.submit(vec![format!("q{i}"), format!("r{i}")]).unwrap())).collect();
    queue.close();
    assert_eq!(queue.submit(vec!["too late".into()]).unwrap_err(), SubmitError::Closed);
    queue.close_and_join();
    for (i, mut rx) in receivers {
        let outs = rx.try_recv().expect("answered before the worker stopped").unwrap();
        assert_eq!(outs, vec![fake_output(&format!("q{i}")), fake_output(&format!("r{i}"))]);
    }
}

#[test]
fn a_dropped_receiver_is_skipped_not_run() {
    let fake = FakeEmbedder::new(50);
    let batches = fake.batches.clone();
    let metrics = Arc::new(Metrics::default());
    let queue = BatchQueue::start(fake, QueueConfig { batch: 4, capacity: 64, ..QueueConfig::default() }, metrics.clone()).unwrap();
    let first = queue.submit(vec!["busy".into()]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(10)); // the worker is running "busy"
    drop(queue.submit(vec!["gone 1".into(), "gone 2".into(), "gone 3".into()]).unwrap());
    let mut last = queue.submit(vec!["kept".into()]).unwrap();
    queue.close_and_join();
    assert!(first.blocking_recv().unwrap().is_ok());
    assert_eq!(last.try_recv().unwrap().unwrap(), vec![fake_output("kept")]);
    assert_eq!(*batches.lock(), vec![1, 1]);
    let text = metrics.render(Some((&FakeEmbedder::new(0).info(), 0)), None);
    assert_eq!(metric(&text, "nx_vulkan_abandoned_inputs_total"), 3.0);
}
