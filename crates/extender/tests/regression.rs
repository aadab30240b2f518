//! One test per bug found with hostile input to the extender, named after
//! what it reproduces (issue 13).

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use topoalign_extender::{Cluster, ExtenderConfig, server};

/// The extender read request bodies of any size on its unauthenticated
/// port; one announcing more than the limit is refused (413) before any of
/// it is read.
#[tokio::test]
async fn request_body_larger_than_the_limit_is_refused_unread() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let cluster = Arc::new(Mutex::new(Cluster::new(ExtenderConfig::default())));
    tokio::spawn(server::serve(listener, cluster, None, async {
        stopped.await.ok();
    }));
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let announced = server::BODY_LIMIT + 1;
    let head = format!(
        "POST /filter HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {announced}\r\n\
         Connection: close\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    stop.send(()).ok();
}
