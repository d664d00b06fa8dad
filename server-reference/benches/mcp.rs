//! MCP benchmark, in process (release): a Pipeline MCP tool call against the HTTP operation it
//! stands for, interleaved on one server. `listPipelineApps` through rmcp's client (JSON-RPC,
//! scope filter, argument check, an internal bearer minted and verified, the router in process)
//! next to `GET /v1/pipeline/apps` through reqwest with the same account.
//!
//! Run: `cargo bench -p intent-server --bench mcp`

use std::time::{Duration, Instant};

use intent_server::AppState;
use intent_server::auth::resource::Resource;
use intent_server::auth::token::Grant;
use intent_server::config::Config;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

const ROUNDS: usize = 2_000;

fn p(times: &mut [Duration], at: f64) -> f64 {
    times.sort();
    times[((times.len() as f64 * at) as usize).min(times.len() - 1)].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = AppState::open(Config::new(dir.path()), &base)
        .await
        .unwrap();
    tokio::spawn(intent_server::serve(listener, state.clone()));
    let mint = |resource: Resource, scopes: &[&str]| {
        state.mint_access_token(&Grant {
            account: "bench".into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            resource: resource.identifier(&base),
            client_id: "bench".into(),
            ttl: Duration::from_secs(3600),
        })
    };
    let http_token = mint(Resource::Pipeline, &["pipeline:catalog"]);
    let mcp_token = mint(Resource::PipelineMcp, &["mcp:pipeline", "pipeline:catalog"]);
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{base}/v1/pipeline/mcp"))
        .auth_header(mcp_token);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/pipeline/apps");

    let (mut direct, mut through_mcp) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let began = Instant::now();
        let response = http
            .get(&url)
            .bearer_auth(&http_token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        direct.push(began.elapsed());
        let began = Instant::now();
        let result = client
            .call_tool(CallToolRequestParams::new("listPipelineApps"))
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(false));
        through_mcp.push(began.elapsed());
    }
    let (d50, d99) = (p(&mut direct, 0.5), p(&mut direct, 0.99));
    let (m50, m99) = (p(&mut through_mcp, 0.5), p(&mut through_mcp, 0.99));
    println!("GET /v1/pipeline/apps          p50 {d50:.3} ms  p99 {d99:.3} ms  ({ROUNDS} calls)");
    println!("tools/call listPipelineApps    p50 {m50:.3} ms  p99 {m99:.3} ms  ({ROUNDS} calls)");
    println!("MCP over HTTP: {:.2}x at p50", m50 / d50);
}
