//! An app written against intent-models and intent-sdk as they are generated today, the way an
//! app uses them: the builder-style client, models made by their builders and read by their
//! members, open enums matched with a wildcard. The compatibility test of `xtask breaking`
//! builds it against crates generated from a changed openapi.json: a change it calls compatible
//! must leave this program compiling.

use intent_sdk::models::{
    AgentEvent, ChatStartRequest, ErrorCode, Session, SessionUpdate, StatementLineMeter, TurnState,
};
use intent_sdk::agent::Agent;
use intent_sdk::{Intent, Resource, StaticToken};

/// Every call an app makes of the generated client, with the arguments an app gives.
async fn calls(intent: &Intent) -> Result<(), Box<dyn std::error::Error>> {
    let client = intent.client();
    let request: ChatStartRequest = ChatStartRequest::builder().message("hello").try_into()?;
    let started = client.start_chat().body(request).send().await?.into_inner();
    let page = client
        .get_chat_events()
        .session_id(started.session_id.as_str())
        .cursor(started.cursor.as_str())
        .limit(5u64)
        .wait(1_000)
        .send()
        .await?
        .into_inner();
    for event in &page.events {
        describe(event);
    }
    let update: SessionUpdate = SessionUpdate::builder()
        .title(Some("renamed".parse()?))
        .try_into()?;
    let session = client
        .update_session()
        .session_id(started.session_id.as_str())
        .body(update)
        .send()
        .await?
        .into_inner();
    println!("{}", title(&session));
    let statement = client.get_statement().period("2026-11").send().await?;
    for line in &statement.lines {
        let meter = match &line.meter {
            StatementLineMeter::Turn => "turns".to_owned(),
            other => other.to_string(),
        };
        println!("{meter} {:?}", line.amount);
    }
    client
        .install_app()
        .application_id(1u64)
        .send()
        .await
        .map_err(intent_sdk::Error::from)
        .map_err(|error| code(&error))?;
    let outcome = intent.agent().run_turn("hello", None).await?;
    println!("{} {}", outcome.turn_id, settled(&outcome.state));
    // A task of its own, as an app writes one: the `Intent` cloned into it, and a handle named
    // with its lifetime.
    let cloned = intent.clone();
    let session = started.session_id.to_string();
    let task = tokio::spawn(async move { session_title(cloned.agent(), &session).await });
    println!("{}", task.await??);
    Ok(())
}

/// A session's title, through a handle an app's function takes.
async fn session_title(agent: Agent<'_>, session: &str) -> Result<String, intent_sdk::Error> {
    Ok(title(&agent.session(session).await?).to_owned())
}

/// An event, by the members of the kinds the app knows.
fn describe(event: &AgentEvent) -> String {
    match event {
        AgentEvent::Message { text, seq, .. } => format!("{seq} {text}"),
        AgentEvent::TurnState { state, .. } => state.to_string(),
        other => format!("{} {}", other.seq(), other.turn_id()),
    }
}

/// A session's title, read through a pattern.
fn title(session: &Session) -> &str {
    let Session { title, .. } = session;
    title
}

/// An error's code, matched with the wildcard its open enum needs.
fn code(error: &intent_sdk::Error) -> String {
    match error.code().and_then(|code| code.parse::<ErrorCode>().ok()) {
        Some(ErrorCode::NotFound) => "absent".to_owned(),
        Some(ErrorCode::CredentialsMissing) => "save the credentials first".to_owned(),
        Some(other) => other.to_string(),
        None => "no code".to_owned(),
    }
}

fn settled(state: &TurnState) -> bool {
    !matches!(state, TurnState::Processing | TurnState::AwaitingAction)
}

/// A model an app's test makes: a session as the server would answer it.
fn fixture() -> Result<Session, Box<dyn std::error::Error>> {
    Ok(Session::builder()
        .id("ses_1")
        .title("t")
        .archived(false)
        .updated_at(0)
        .try_into()?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let intent = Intent::builder("http://127.0.0.1:9")
        .token(Resource::Agent, StaticToken::new("token"))
        .build()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if std::env::args().any(|arg| arg == "--call") {
        runtime.block_on(calls(&intent))?;
    }
    println!("{}", title(&fixture()?));
    Ok(())
}
