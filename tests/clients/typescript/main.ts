// A TypeScript client of the interface, typed by openapi-typescript from ../../openapi.json and
// called through openapi-fetch. Against a running server it chats (and reads the session's
// events until the turn settles), renames the session, builds and simulates an EVM transfer, and
// reads the account's usage statement. tests/clients/run generates the types, type-checks this
// file with `tsc --strict` and runs it.
//
// Usage: node dist/main.js BASE_URL, with AGENT_TOKEN, PIPELINE_TOKEN and ACCOUNT_TOKEN set:
// tokens for {BASE_URL}/v1/agent (agent:read agent:write), {BASE_URL}/v1/pipeline
// (pipeline:execute) and {BASE_URL}/v1/account (account:usage:read).

import createClient from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";

type Schemas = components["schemas"];
type AgentEvent = Schemas["AgentEvent"];
type TurnState = Schemas["TurnState"];

/// Two of the devnet's development accounts (docs/server.md: The Pipeline).
const SENDER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
const RECIPIENT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set`);
  }
  return value;
}

/// A client for one resource: every /v1 request carries a token bound to its resource.
function client(baseUrl: string, token: string) {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
}

/// The body of a successful answer, or an error naming the request, its status and envelope.
function ok<T>(what: string, answer: { data?: T; error?: unknown; response: Response }): T {
  if (answer.data === undefined) {
    throw new Error(
      `${what}: ${answer.response.status} ${JSON.stringify(answer.error ?? null)}`,
    );
  }
  return answer.data;
}

function settled(state: TurnState): boolean {
  return state !== "processing";
}

async function chat(agent: ReturnType<typeof client>): Promise<string> {
  const started = ok(
    "POST /v1/agent/chat",
    await agent.POST("/v1/agent/chat", {
      body: { message: "Hello from the TypeScript client" },
    }),
  );
  console.log(`chat: session ${started.sessionId}, turn ${started.turnId} ${started.state}`);

  // Read the log from just before the turn, long-polling, until its latest turn_state settles.
  let cursor = started.cursor;
  let state: TurnState = started.state;
  const events: AgentEvent[] = [];
  const deadline = Date.now() + 60_000;
  while (!settled(state)) {
    if (Date.now() > deadline) {
      throw new Error(`turn ${started.turnId} still ${state} after 60 s`);
    }
    const page = ok(
      "GET /v1/agent/chat/{sessionId}",
      await agent.GET("/v1/agent/chat/{sessionId}", {
        params: {
          path: { sessionId: started.sessionId },
          query: { cursor, wait: 10_000 },
        },
      }),
    );
    cursor = page.cursor;
    for (const event of page.events) {
      events.push(event);
      if (event.type === "turn_state" && event.turnId === started.turnId) {
        state = event.state;
      }
    }
  }
  for (const event of events) {
    if (event.type === "message") {
      console.log(`chat: #${event.seq} ${event.role}: ${event.text}`);
    } else {
      console.log(`chat: #${event.seq} ${event.type}`);
    }
  }
  if (state !== "complete") {
    throw new Error(`turn ${started.turnId} ended ${state}`);
  }
  const replied = events.some((event) => event.type === "message" && event.role === "assistant");
  if (!replied) {
    throw new Error("the turn completed without an assistant message");
  }
  console.log(`chat: turn ${started.turnId} ${state} after ${events.length} events`);
  return started.sessionId;
}

async function rename(agent: ReturnType<typeof client>, sessionId: string): Promise<void> {
  const title = "Renamed by the TypeScript client";
  const session = ok(
    "PATCH /v1/agent/sessions/{sessionId}",
    await agent.PATCH("/v1/agent/sessions/{sessionId}", {
      params: { path: { sessionId } },
      body: { title },
    }),
  );
  if (session.title !== title) {
    throw new Error(`the session is titled ${JSON.stringify(session.title)}`);
  }
  console.log(`rename: session ${session.id} is now "${session.title}"`);
}

async function build(pipeline: ReturnType<typeof client>): Promise<void> {
  const request: Schemas["PipelineBuildRequest"] = {
    app: "evm-assets",
    operations: [
      {
        operation: "native-transfer",
        input: { chainId: 31337, from: SENDER, to: RECIPIENT, amount: "0.5" },
      },
    ],
    simulate: true,
  };
  const result = ok(
    "POST /v1/pipeline/evm/build",
    await pipeline.POST("/v1/pipeline/evm/build", { body: request }),
  );
  if (result.status === "committed") {
    throw new Error("a build request answered a commit result");
  }
  const simulation = result.simulation;
  if (result.status !== "simulated" || simulation === undefined) {
    throw new Error(`the Build is ${result.status}, without a simulation`);
  }
  console.log(
    `build: ${result.summary?.title ?? "a Build"}, ${result.actions.length} action(s), digest ${result.digest}`,
  );
  console.log(`build: simulation ${simulation.status}, gas units ${simulation.gas?.units ?? "none"}`);
  for (const change of simulation.balanceChanges) {
    const who = change.account ?? "?";
    console.log(`build:   ${who} ${change.direction ?? "?"} ${change.amount} ${change.symbol ?? change.asset}`);
  }
  if (simulation.status !== "passed") {
    throw new Error(`the simulation ended ${simulation.status}`);
  }
}

async function statement(account: ReturnType<typeof client>): Promise<void> {
  const usage = ok("GET /v1/account/statement", await account.GET("/v1/account/statement"));
  for (const line of usage.lines) {
    console.log(
      `statement: ${line.meter} ${line.quantity} x ${line.unitPrice} = ${line.amount} ${usage.currency}`,
    );
  }
  console.log(`statement: total ${usage.total} ${usage.currency}`);
  for (const meter of ["turn", "build", "simulation"] as const) {
    const line = usage.lines.find((l) => l.meter === meter);
    if (line === undefined || line.quantity < 1) {
      throw new Error(`the statement meters no ${meter}`);
    }
  }
}

async function main(): Promise<void> {
  const baseUrl = process.argv[2] ?? env("BASE_URL");
  const agent = client(baseUrl, env("AGENT_TOKEN"));
  const pipeline = client(baseUrl, env("PIPELINE_TOKEN"));
  const account = client(baseUrl, env("ACCOUNT_TOKEN"));

  const sessionId = await chat(agent);
  await rename(agent, sessionId);
  await build(pipeline);
  await statement(account);
  console.log("typescript client: chat, rename, build and statement passed");
}

main().catch((error: unknown) => {
  console.error(`typescript client: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
