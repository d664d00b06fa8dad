#!/usr/bin/env python3
"""Drives Agent MCP with the official Python MCP SDK (mcp 2.3.0), as a host that was never
registered: OAuth discovery from the 401, a client id from a Client ID Metadata Document or from
dynamic client registration, authorization code with PKCE approved on the consent page by a
scripted person, then a scripted model that reads only the text content of tool results and runs
a transfer turn to completion.

Three modes, one after the other, each a fresh host:
  default      the SDK's default negotiation (server/discover), protocol 2026-07-28, signing in
               with a Client ID Metadata Document this script serves over HTTPS on localhost
               (the server must allow that host and trust tests/fixtures/tls/ca.pem): the turn's
               approval is asked through elicitation inside the call (a multi-round-trip input
               request) and the result is `complete`;
  legacy       the SDK's `initialize` handshake (2025-11-25), declaring elicitation, signing in
               (as legacy-text does) by dynamic client registration: the server
               keeps a session (Mcp-Session-Id), asks the approval with an `elicitation/create`
               request within the call and the result is `complete`; then the client subscribes
               to the chat session's event log (`resources/subscribe`), appends a turn with
               startChat, waits for `notifications/resources/updated` on the session's GET
               stream, and unsubscribes;
  legacy-text  the handshake without elicitation: the turn comes back `awaiting_action` and the
               model resolves it with resolveAction, then reads on with getChatEvents.

Usage: python agent.py BASE_URL        (exit 0 on success, 1 with a message on failure)
The server runs with `--client-metadata-host localhost --client-metadata-roots
tests/fixtures/tls/ca.pem`, as .ci/mcp-clients starts it.
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp import Client, MCPDeprecationWarning, MCPError, types
from mcp.client import ClientRequestContext
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

TRANSFER = "send 0.25 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
SCOPES = ["mcp:agent", "agent:read", "agent:write", "agent:actions:resolve"]
# A loopback redirect URI: the server matches it on any port. Nothing needs to listen on it,
# since the scripted person reads the code from the 303's Location instead of following it.
REDIRECT_URI = "http://127.0.0.1:8976/callback"
MODE_TIMEOUT_SECONDS = 120
MODES = ["default", "legacy", "legacy-text"]
# The resource a handshake client subscribes to: one chat session's event log.
EVENTS_URI = "intent://sessions/{session}/events"
NOTIFICATION_SECONDS = 10
# The modes that sign in with a Client ID Metadata Document; the others register.
BY_DOCUMENT = {"default"}
TLS = Path(__file__).resolve().parents[1] / "fixtures" / "tls"


class Failure(Exception):
    """A check that did not hold; its message says what was read."""


def check(condition: Any, message: str) -> None:
    if not condition:
        raise Failure(message)


def step(mode: str, text: str) -> None:
    print(f"[{mode}] {text}", flush=True)


# --- token storage, in memory ---------------------------------------------------------------


class MemoryStorage:
    """The SDK's `TokenStorage` protocol, held in memory: a fresh one per mode, so each mode is
    a host that was never registered."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


# --- the host's Client ID Metadata Documents -------------------------------------------------


class DocumentHost:
    """Serves each mode's client metadata document at https://localhost:PORT/clients/MODE.json
    with the test certificate, and counts the fetches of each."""

    def __init__(self) -> None:
        self.documents: dict[str, dict[str, Any]] = {}
        self.fetches: dict[str, int] = {}
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                document = host.documents.get(self.path)
                body = json.dumps(document).encode() if document else b"{}"
                host.fetches[self.path] = host.fetches.get(self.path, 0) + 1
                self.send_response(200 if document else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(TLS / "localhost.pem", TLS / "localhost.key")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve(self, mode: str, metadata: OAuthClientMetadata) -> str:
        """The URL of `mode`'s document, which names that URL as its client_id."""
        path = f"/clients/{mode}.json"
        url = f"https://localhost:{self.port}{path}"
        self.documents[path] = {"client_id": url, **metadata.model_dump(mode="json", exclude_none=True)}
        return url

    def fetched(self, url: str) -> int:
        return self.fetches.get(urlsplit(url).path, 0)


# --- the scripted person on the consent page ------------------------------------------------


class ConsentForm(HTMLParser):
    """The consent page's POST form: its action and its inputs (name -> value)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms = 0
        self.action: str | None = None
        self.inputs: dict[str, str] = {}
        self.buttons: list[tuple[str, str]] = []
        self._inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("method", "").lower() == "post":
            self.forms += 1
            self.action = a.get("action")
            self._inside = True
        elif self._inside and tag == "input" and a.get("type") == "hidden":
            self.inputs[a["name"]] = a.get("value", "")
        elif self._inside and tag == "button":
            self.buttons.append((a.get("name", ""), a.get("value", "")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._inside = False


async def approve(authorization_url: str, account: str) -> tuple[dict[str, str], str]:
    """Opens the authorization URL as a browser would (no cookie jar, no redirects followed),
    approves the consent page as `account`, and returns what the page carried back of the
    request (its hidden inputs, the CSRF token aside) and the 303's Location."""
    async with httpx2.AsyncClient(timeout=30, follow_redirects=False) as browser:
        page = await browser.get(authorization_url)
        check(page.status_code == 200, f"the authorize page: {page.status_code} {page.text[:500]}")
        cookie_header = page.headers.get("set-cookie")
        check(cookie_header, f"the authorize page sets no CSRF cookie: {dict(page.headers)}")
        cookie = cookie_header.split(";", 1)[0]
        form = ConsentForm()
        form.feed(page.text)
        check(form.forms == 1, f"one POST form on the consent page, found {form.forms}: {page.text[:800]}")
        check("csrf" in form.inputs, f"the consent form has no csrf field: {form.inputs.keys()}")
        check(("decision", "approve") in form.buttons, f"no approve button: {form.buttons}")
        target = authorization_url if not form.action else str(httpx2.URL(authorization_url).join(form.action))
        data = {**form.inputs, "account": account, "decision": "approve"}
        answer = await browser.post(target, data=data, headers={"Cookie": cookie})
    check(answer.status_code == 303, f"approving: {answer.status_code} {answer.text[:500]}")
    location = answer.headers.get("location", "")
    query = parse_qs(urlsplit(location).query)
    check("error" not in query, f"the approval redirected with an error: {location!r}")
    check(query.get("code"), f"no code in the redirect: {location!r}")
    return {k: v for k, v in form.inputs.items() if k != "csrf"}, location


@dataclass
class Person:
    """Supplies the provider's redirect and callback handlers: on the redirect it approves the
    consent page as `account` and keeps the code and state of the 303's Location for the
    callback."""

    mode: str
    account: str
    asked_for: dict[str, str] = field(default_factory=dict)
    result: AuthorizationCodeResult | None = None

    async def redirect_handler(self, authorization_url: str) -> None:
        # What the SDK asked for, as the page carries it back.
        self.asked_for, location = await approve(authorization_url, self.account)
        check(location.startswith(REDIRECT_URI + "?"), f"the approval redirects elsewhere: {location!r}")
        query = parse_qs(urlsplit(location).query)
        self.result = AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )
        step(self.mode, f"consent approved as {self.account!r}: 303 to the redirect URI with code, state and iss")

    async def callback_handler(self) -> AuthorizationCodeResult:
        check(self.result is not None, "the callback ran before the redirect handler got a code")
        result, self.result = self.result, None
        return result


# --- a trace of the HTTP the SDK sends -------------------------------------------------------


@dataclass
class Trace:
    """Every request the SDK's HTTP client sends (auth flow included) and its status; bodies of
    error answers are kept, so that a server problem can be reported as it was."""

    mcp_url: str
    entries: list[tuple[str, str, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # The JSON-RPC messages POSTed to the MCP endpoint and answered 2xx, in order.
    messages: list[dict[str, Any]] = field(default_factory=list)
    # Every Mcp-Session-Id the MCP endpoint answered with.
    session_ids: set[str] = field(default_factory=set)
    # The content types of the MCP endpoint's 2xx answers to GET (the standalone stream).
    get_streams: list[str] = field(default_factory=list)

    async def on_response(self, response: httpx2.Response) -> None:
        request = response.request
        self.entries.append((request.method, request.url.path, response.status_code))
        if str(request.url) == self.mcp_url:
            if response.headers.get("mcp-session-id"):
                self.session_ids.add(response.headers["mcp-session-id"])
            if request.method == "GET" and response.status_code < 300:
                self.get_streams.append(response.headers.get("content-type", ""))
        if str(request.url) == self.mcp_url and request.method == "POST" and response.status_code < 300:
            try:
                self.messages.append(json.loads(request.content))
            except ValueError:
                pass
        expected_401 = response.status_code == 401 and str(request.url) == self.mcp_url
        if response.status_code >= 400 and not expected_401:
            await response.aread()
            sent = request.content.decode(errors="replace") if request.content else ""
            self.errors.append(
                f"{request.method} {request.url} sent {sent[:1500]!r} -> {response.status_code} "
                f"{response.headers.get('content-type', '')} {response.text[:1500]!r}"
            )

    def declared_capabilities(self, method: str) -> list[dict[str, Any]]:
        """The client capabilities the SDK sent with each `method` message: in `initialize`'s
        params on the handshake, in each request's `_meta` on 2026-07-28."""
        found = []
        for message in self.messages:
            if message.get("method") != method:
                continue
            params = message.get("params") or {}
            if method == "initialize":
                found.append(params.get("capabilities") or {})
            else:
                found.append((params.get("_meta") or {}).get(types.CLIENT_CAPABILITIES_META_KEY) or {})
        return found

    def answers(self) -> list[dict[str, Any]]:
        """The client's answers to the server's requests (JSON-RPC responses it POSTed)."""
        return [m for m in self.messages if "method" not in m and "id" in m]

    def calls(self, tool: str) -> list[dict[str, Any]]:
        """The `tools/call` messages (each round) for `tool`."""
        return [
            m
            for m in self.messages
            if m.get("method") == "tools/call" and (m.get("params") or {}).get("name") == tool
        ]

    def saw(self, method: str, path: str, status: int | None = None) -> bool:
        return any(m == method and p == path and (status is None or s == status) for m, p, s in self.entries)


# --- the scripted model: reads only text ---------------------------------------------------


def text_of(result: types.CallToolResult) -> str:
    """All of a tool result's text content; `structuredContent` is never read."""
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def read(result: types.CallToolResult, tool: str) -> Any:
    """The JSON a successful result's text carries; a tool error fails with its text."""
    told = text_of(result)
    check(not result.is_error, f"{tool} answered a tool error: {told}")
    try:
        return json.loads(told)
    except ValueError as error:
        raise Failure(f"{tool}'s text is not JSON ({error}): {told[:500]}") from None


@dataclass
class Observed:
    progress: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    # (when, uri) of each notifications/resources/updated the session surfaced.
    updated: list[tuple[float, str]] = field(default_factory=list)
    # The methods of all the server notifications the session surfaced, in order.
    notified: list[str] = field(default_factory=list)
    # Transport-level faults (an SSE event the SDK could not parse, a broken stream).
    stream_errors: list[str] = field(default_factory=list)
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append(message or "")

    async def on_message(self, message: types.ServerNotification | Exception) -> None:
        """The SDK's `message_handler`: every server notification the session surfaces (from
        POST responses and the standalone GET stream alike), and the transport's exceptions."""
        if isinstance(message, Exception):
            self.stream_errors.append(f"{type(message).__name__}: {message}")
            return
        self.notified.append(message.method)
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.append((time.monotonic(), message.params.uri))
            self._arrived.set()

    async def update_for(self, uri: str, since: float, seconds: float) -> float | None:
        """When the first `notifications/resources/updated` for `uri` received after `since`
        arrived, waiting up to `seconds` for it; None if none came."""
        with anyio.move_on_after(seconds):
            while True:
                for at, got in self.updated:
                    if at >= since and got == uri:
                        return at
                self._arrived = anyio.Event()
                await self._arrived.wait()
        return None

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.asked.append(params.message)
        if not isinstance(params, types.ElicitRequestFormParams):
            return types.ErrorData(code=types.INVALID_PARAMS, message=f"expected a form, got {params.mode}")
        schema = params.requested_schema.get("properties", {}).get("decision", {})
        if "approve" not in schema.get("enum", []):
            return types.ErrorData(code=types.INVALID_PARAMS, message=f"no approve choice: {params.requested_schema}")
        return types.ElicitResult(action="accept", content={"decision": "approve"})


# --- one mode -------------------------------------------------------------------------------


async def run_mode(base: str, mode: str, documents: DocumentHost) -> None:
    mcp_url = f"{base}/v1/agent/mcp"
    account = f"ci-{mode}"
    storage = MemoryStorage()
    person = Person(mode=mode, account=account)
    trace = Trace(mcp_url=mcp_url)
    metadata = OAuthClientMetadata(
        client_name=f"mcp-python-sdk-ci-{mode}",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=" ".join(SCOPES),
    )
    document_url = documents.serve(mode, metadata) if mode in BY_DOCUMENT else None
    provider = OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=metadata,
        client_metadata_url=document_url,
        storage=storage,
        redirect_handler=person.redirect_handler,
        callback_handler=person.callback_handler,
    )
    http = httpx2.AsyncClient(
        auth=provider,
        timeout=httpx2.Timeout(30.0, read=300.0),
        event_hooks={"response": [trace.on_response]},
    )
    observed = Observed()
    handshake = mode != "default"
    client = Client(
        streamable_http_client(mcp_url, http_client=http),
        mode="legacy" if handshake else "auto",
        # Without a callback the SDK declares no elicitation capability.
        elicitation_callback=None if mode == "legacy-text" else observed.elicit,
        message_handler=observed.on_message,
        client_info=types.Implementation(name=f"intent-ci-{mode}", version="1"),
    )
    try:
        async with http, client:
            # 1. Signed in through the provider: 401, metadata, a client id (the document's URL,
            # or registration), code, token.
            register = "/api/auth/oauth2/register"
            for method, path, status in [
                ("POST", "/v1/agent/mcp", 401),
                ("GET", "/.well-known/oauth-protected-resource/v1/agent/mcp", 200),
                ("GET", "/.well-known/oauth-authorization-server", 200),
                *([] if document_url else [("POST", register, 201)]),
                ("POST", "/api/auth/oauth2/token", 200),
            ]:
                check(
                    trace.saw(method, path, status),
                    f"the sign-in did not go {method} {path} -> {status}: {trace.entries} {trace.errors}",
                )
            registered = storage.client_info
            check(registered is not None, "the provider holds no client")
            check(
                registered.token_endpoint_auth_method == "none",
                f"registered as {registered.token_endpoint_auth_method!r}, not a public client",
            )
            if document_url:
                check(not trace.saw("POST", register), f"the document's host registered too: {trace.entries}")
                check(registered.client_id == document_url, f"the client id is {registered.client_id!r}")
                check(person.asked_for.get("client_id") == document_url, f"authorize client: {person.asked_for}")
                check(documents.fetched(document_url) >= 1, "the server never fetched the document")
                client_id = f"the document at {document_url} (fetched {documents.fetched(document_url)}x)"
            else:
                client_id = f"registered {registered.client_id}"
            check(person.asked_for.get("resource") == mcp_url, f"authorize resource: {person.asked_for}")
            check(
                set(person.asked_for.get("scope", "").split()) == set(SCOPES),
                f"authorize scope: {person.asked_for.get('scope')!r}",
            )
            check(person.asked_for.get("code_challenge_method") == "S256", f"PKCE: {person.asked_for}")
            tokens = storage.tokens
            check(tokens is not None and tokens.access_token, "no access token stored")
            check(set(SCOPES) <= set((tokens.scope or "").split()), f"granted scope: {tokens.scope!r}")
            step(
                mode,
                f"signed in: 401 -> resource metadata -> AS metadata -> {client_id} "
                f"-> code+PKCE (S256, resource={mcp_url}) -> token with scope {tokens.scope!r}",
            )

            expected = "2025-11-25" if handshake else "2026-07-28"
            check(client.protocol_version == expected, f"negotiated {client.protocol_version}, not {expected}")
            if handshake:
                check(len(trace.session_ids) == 1, f"initialize gave Mcp-Session-Id {sorted(trace.session_ids)}")
                step(mode, f"initialize opened session {next(iter(trace.session_ids))} (Mcp-Session-Id)")
            else:
                check(not trace.session_ids, f"the stateless mode was given sessions {sorted(trace.session_ids)}")

            # 2. Tools.
            listed = await client.list_tools()
            names = {tool.name for tool in listed.tools}
            for name in ["run_turn", "resolveAction", "getChatEvents", "startChat", "getSession"]:
                check(name in names, f"{name} is not listed: {sorted(names)}")
            step(mode, f"tools/list: {len(names)} tools, run_turn and resolveAction among them")
            tools = {tool.name: tool for tool in listed.tools}

            # 3. The model's turn.
            if mode == "default":
                await elicited_turn(client, observed, mode)
                calls = trace.declared_capabilities("tools/call")
                check(calls and all("elicitation" in c for c in calls), f"tools/call declared {calls}")
                rounds = trace.calls("run_turn")
                answered = [r for r in rounds if (r.get("params") or {}).get("inputResponses")]
                check(len(rounds) == 2 and len(answered) == 1, f"run_turn took {len(rounds)} rounds: {rounds}")
                check(not trace.answers(), f"the stateless mode answered server requests: {trace.answers()}")
                step(mode, "elicitation was declared on every tools/call; run_turn took 2 rounds (input request, answer)")
            elif mode == "legacy":
                session = await elicited_turn(client, observed, mode)
                # The question came as a server request within the one call, not as an input request.
                rounds = trace.calls("run_turn")
                check(
                    len(rounds) == 1 and not (rounds[0].get("params") or {}).get("inputResponses"),
                    f"run_turn took {len(rounds)} rounds: {rounds}",
                )
                answers = trace.answers()
                check(
                    len(answers) == 1 and (answers[0].get("result") or {}).get("action") == "accept",
                    f"the client answered the server's requests with {answers}",
                )
                step(
                    mode,
                    f"the person was asked by an elicitation/create request (id {answers[0]['id']!r}) "
                    "within the one run_turn call and the client answered accept",
                )
                await subscribed_append(client, observed, trace, session, mode)
            else:
                await text_turn(client, observed, tools["resolveAction"], mode)
                check(not trace.answers(), f"the client answered server requests it did not declare: {trace.answers()}")

            # 4. What the server advertised to this mode.
            version = client.protocol_version
            capabilities = client.server_capabilities
            if mode == "default":
                check(version == "2026-07-28", f"the default mode negotiated {version}, not 2026-07-28")
                check(client.session.discover_result is not None, "no server/discover result was adopted")
                check(client.session.initialize_result is None, "the default mode ran initialize")
                check(trace.declared_capabilities("server/discover"), f"no server/discover sent: {trace.messages}")
                check(not trace.declared_capabilities("initialize"), "the default mode sent initialize")
                resources = capabilities.resources
                check(resources is not None and resources.subscribe is True, f"no resource subscriptions: {capabilities}")
            else:
                check(version == "2025-11-25", f"the handshake negotiated {version}")
                check(client.session.initialize_result is not None, f"the {mode} mode has no initialize result")
                resources = capabilities.resources
                check(
                    resources is not None and resources.subscribe is True,
                    f"the handshake is not offered resources.subscribe: {capabilities}",
                )
                sent = trace.declared_capabilities("initialize")
                declares = mode == "legacy"
                check(
                    len(sent) == 1 and ("elicitation" in sent[0]) == declares,
                    f"initialize declared {sent}; elicitation expected: {declares}",
                )
            check(capabilities.tools is not None, f"no tools capability: {capabilities}")
            check(client.instructions, "the server gave no instructions")
            step(
                mode,
                f"protocol {version}; capabilities "
                f"{capabilities.model_dump(by_alias=True, exclude_none=True, mode='json')}",
            )

            check(not trace.errors, f"error answers during the run: {trace.errors}")
            check(not observed.stream_errors, f"the transport reported faults: {observed.stream_errors}")
        if handshake:
            # Leaving the client ends the session with a DELETE, which the SDK takes as done on
            # 200 or 204 only.
            ended = [s for m, p, s in trace.entries if m == "DELETE" and p == urlsplit(mcp_url).path]
            check(ended in ([200], [204]), f"the session's DELETE answered {ended}")
            step(mode, f"session ended: DELETE -> {ended}")
    except Exception as error:
        # A check of ours, though the SDK's task groups may have wrapped it in a group.
        failures = [e for e in flatten(error) if isinstance(e, Failure)]
        if failures:
            raise failures[0] from None
        # Else the SDK's own exception, with what the server answered.
        detail = "; ".join(trace.errors) or "no error answer recorded"
        raise Failure(
            f"{mode} mode against {mcp_url}: {describe(error)} "
            f"(HTTP trace: {trace.entries}; error answers: {detail})"
        ) from error


async def elicited_turn(client: Client, observed: Observed, mode: str) -> str:
    """A transfer turn whose approval the server asks by elicitation; the chat session's id."""
    result = await client.call_tool("run_turn", {"message": TRANSFER}, progress_callback=observed.on_progress)
    outcome = read(result, "run_turn")
    check(
        len(observed.asked) == 1,
        f"the person was asked {len(observed.asked)} times: {observed.asked}; run_turn said {text_of(result)[:800]}",
    )
    asked = observed.asked[0]
    check("balance" in asked and "guard" in asked, f"the question does not show balances and guards: {asked!r}")
    step(mode, f"elicitation asked the person: {asked.splitlines()[0]!r} ... approved")
    check(outcome.get("state") == "complete", f"run_turn ended {outcome.get('state')!r}: {outcome}")
    messages = outcome.get("messages")
    check(isinstance(messages, list) and messages, f"no assistant messages: {outcome}")
    for told in ["asks for approval: ", "the action was approved", "assistant: ", "the turn is complete"]:
        check(any(m.startswith(told) for m in observed.progress), f"no progress {told!r}: {observed.progress}")
    step(mode, f"progress: {len(observed.progress)} notifications, e.g. {observed.progress[-3:]}")
    step(mode, f"run_turn complete (read from text): session {outcome['sessionId']}, messages {messages}")
    return outcome["sessionId"]


async def subscribed_append(client: Client, observed: Observed, trace: Trace, session: str, mode: str) -> None:
    """Subscribes to `session`'s event log, appends a turn with startChat, waits to be told of
    the append, then unsubscribes."""
    uri = EVENTS_URI.format(session=session)
    with warnings.catch_warnings():
        # The SDK marks resources/subscribe as removed in 2026-07-28; the handshake still has it.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await client.subscribe_resource(uri)
        step(mode, f"resources/subscribe {uri}")
        since = time.monotonic()
        started = read(
            await client.call_tool("startChat", {"body": {"message": "hello", "sessionId": session}}),
            "startChat",
        )
        check(started.get("sessionId") == session, f"startChat answered {started}")
        arrived = await observed.update_for(uri, since, NOTIFICATION_SECONDS)
        check(
            arrived is not None,
            f"no notifications/resources/updated for {uri} within {NOTIFICATION_SECONDS} s; "
            f"notified {observed.notified}; GET streams {trace.get_streams}",
        )
        step(mode, f"told of the append {arrived - since:.2f} s after startChat (turn {started['turnId']})")
        read_back = await client.read_resource(f"{uri}?cursor={started['cursor']}")
        texts = [c.text for c in read_back.contents if isinstance(c, types.TextResourceContents)]
        check(len(texts) == 1, f"resources/read gave {read_back.contents}")
        events = json.loads(texts[0]).get("events") or []
        turns = {event.get("turnId") for event in events}
        check(turns == {started["turnId"]}, f"read from the turn's cursor: events of turns {turns}")
        step(mode, f"resources/read from the turn's cursor: {len(events)} events, all of the new turn")
        await client.unsubscribe_resource(uri)
        step(mode, "resources/unsubscribe")


async def text_turn(client: Client, observed: Observed, resolve_tool: types.Tool, mode: str) -> None:
    """A transfer turn that comes back awaiting its action, resolved with resolveAction."""
    result = await client.call_tool("run_turn", {"message": TRANSFER}, progress_callback=observed.on_progress)
    outcome = read(result, "run_turn")
    check(not observed.asked, f"a client without elicitation was asked through it: {observed.asked}")
    check(outcome.get("state") == "awaiting_action", f"run_turn ended {outcome.get('state')!r}: {outcome}")
    action = outcome.get("action") or {}
    action_id = action.get("actionId")
    check(isinstance(action_id, str) and action_id, f"no actionId in the text: {outcome}")
    session, turn = outcome["sessionId"], outcome["turnId"]
    check(any(m.startswith("asks for approval: ") for m in observed.progress), f"progress: {observed.progress}")
    step(mode, f"run_turn awaiting_action (read from text): action {action_id}, {action.get('title')!r}")

    # resolveAction: path parameters and the Idempotency-Key header are arguments, the body is `body`.
    properties = resolve_tool.input_schema.get("properties", {})
    key_name = next((name for name in properties if name.lower() == "idempotency-key"), None)
    check(key_name, f"resolveAction takes no idempotency key argument: {list(properties)}")
    arguments = {
        "sessionId": session,
        "actionId": action_id,
        key_name: f"ci-{mode}-{action_id}",
        "body": {
            "revision": action["revision"],
            "result": {"outcome": "approved", "digest": action["build"]["digest"]},
        },
    }
    resolved = read(await client.call_tool("resolveAction", arguments), "resolveAction")
    check(resolved.get("actionId") == action_id, f"resolveAction answered {resolved}")
    step(mode, f"resolveAction approved it: {resolved}")

    # Read on from the cursor until the turn says complete.
    cursor = outcome["cursor"]
    state, messages, approved = None, [], False
    deadline = time.monotonic() + 90
    while state != "complete":
        check(time.monotonic() < deadline, f"the turn did not complete; last state {state!r}")
        page = read(
            await client.call_tool("getChatEvents", {"sessionId": session, "cursor": cursor, "wait": 20000}),
            "getChatEvents",
        )
        for event in page.get("events", []):
            if event.get("turnId") != turn:
                continue
            kind = event.get("type")
            if kind == "turn_state":
                state = event.get("state")
                check(state in ("processing", "complete"), f"the turn went {state!r}: {event}")
            elif kind == "message" and event.get("role") == "assistant":
                messages.append(event.get("text"))
            elif kind == "action_result":
                approved = event.get("result", {}).get("outcome") == "approved"
        cursor = page.get("cursor", cursor)
    check(approved, "no approved action_result was read")
    step(mode, f"getChatEvents: the turn is complete, assistant said {messages}")


def flatten(error: BaseException) -> list[BaseException]:
    """An exception, or the leaves of an ExceptionGroup."""
    inner = getattr(error, "exceptions", None)  # an ExceptionGroup (or its 3.10 backport)
    if isinstance(inner, (list, tuple)):
        return [leaf for member in inner for leaf in flatten(member)]
    return [error]


def describe(error: BaseException) -> str:
    """An exception, its ExceptionGroup members unwrapped."""
    leaves = flatten(error)
    if leaves != [error]:
        return "; ".join(describe(leaf) for leaf in leaves)
    if isinstance(error, MCPError):
        return f"MCPError {error.code}: {error.message} {error.data or ''}".strip()
    return f"{type(error).__name__}: {error}"


async def main(base: str) -> None:
    documents = DocumentHost()
    for mode in MODES:
        started = time.monotonic()
        with anyio.fail_after(MODE_TIMEOUT_SECONDS):
            await run_mode(base, mode, documents)
        step(mode, f"passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python agent.py BASE_URL")
    began = time.monotonic()
    try:
        anyio.run(main, sys.argv[1].rstrip("/"))
    except Failure as failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        sys.exit(1)
    except BaseException as error:  # noqa: BLE001 - any other failure, said plainly
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        print(f"FAIL: {describe(error)}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {len(MODES)} modes passed in {time.monotonic() - began:.1f} s")
