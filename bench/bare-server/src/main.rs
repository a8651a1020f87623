//! `bare-server ADDR RESPONSE_FILE`: answers every `POST /v1/decide` with the bytes of
//! RESPONSE_FILE after reading the whole body, with the runtime toolgate's server uses (tokio
//! multi-thread, axum 0.8, HTTP/1). The floor `bench/server_ratio.sh` holds toolgate to.

use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use axum::routing::post;
use axum::Router;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(addr), Some(file)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: bare-server ADDR RESPONSE_FILE");
        std::process::exit(2);
    };
    let body: &'static [u8] = match std::fs::read(file) {
        Ok(b) => Box::leak(b.into_boxed_slice()),
        Err(e) => {
            eprintln!("cannot read {file}: {e}");
            std::process::exit(2);
        }
    };
    let app = Router::new().route(
        "/v1/decide",
        post(move |request: Bytes| async move {
            std::hint::black_box(request.len());
            ([(CONTENT_TYPE, "application/json")], body)
        }),
    );
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot bind {addr}: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
