#!/usr/bin/env python3
"""Drives Agent and Pipeline MCP with the MCP Inspector's CLI (pinned in package-lock.json), as
a host that was never registered, and checks what it reports.

- Agent MCP: the CLI signs in with a Client ID Metadata Document (`--client-metadata-url`) this
  script serves over HTTPS on localhost; `tools/list --strict` must report no schema finding;
  then a model's turn through the CLI's calls: `run_turn` comes back `awaiting_action`, the
  action is approved with `resolveAction`, and `getChatEvents` reads on until `complete`.
- Pipeline MCP: the CLI signs in by dynamic client registration, and `tools/list --strict` must
  report no schema finding.

The CLI's interactive OAuth opens the authorization URL with `xdg-open`; this script puts its
own `xdg-open` first on the CLI's PATH, and names it as `BROWSER` too, which runs this script as
the person (`--browse URL`): it approves the consent page and follows the redirect to the CLI's
callback listener. It runs in agent.py's virtual environment, and reuses its pieces.

Usage: python inspector.py MCP_INSPECTOR BASE_URL   (exit 0 on success, 1 with a message)
The server runs with `--client-metadata-host localhost --client-metadata-roots
tests/fixtures/tls/ca.pem`, as .ci/mcp-clients starts it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio
from agent import TRANSFER, DocumentHost, Failure, approve, check
from mcp.shared.auth import OAuthClientMetadata

ACCOUNT = "ci-inspector"
CALL_SECONDS = 30


def step(text: str) -> None:
    print(f"[inspector] {text}", flush=True)


# --- the person, run by the CLI as its browser ----------------------------------------------


def browse(url: str) -> None:
    """Approves the consent page at `url` as ACCOUNT and delivers the code to the CLI's
    callback listener, as a browser following the redirect would."""
    asked_for, location = anyio.run(approve, url, ACCOUNT)
    with urllib.request.urlopen(location, timeout=30) as callback:
        check(callback.status == 200, f"the CLI's callback answered {callback.status}")
    with open(os.environ["INSPECTOR_PERSON_LOG"], "a") as log:
        log.write(json.dumps({"client_id": asked_for.get("client_id")}) + "\n")


# --- the CLI ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cli:
    """Runs the Inspector's CLI against one MCP endpoint, keeping its OAuth state in a home of
    its own, with this script as its browser."""

    def __init__(self, inspector: str, url: str, work: Path, sign_in: list[str]) -> None:
        self.inspector, self.url, self.sign_in = inspector, url, sign_in
        bin_dir = work / "bin"
        bin_dir.mkdir(exist_ok=True)
        opener = bin_dir / "xdg-open"
        opener.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" --browse "$1"\n')
        opener.chmod(0o755)
        self.env = {
            **os.environ,
            "HOME": str(work / "home"),
            # The `open` package runs the system's xdg-open, or its own copy, which opens $BROWSER.
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "BROWSER": str(opener),
            "MCP_AUTO_OPEN_ENABLED": "true",
            "MCP_INSPECTOR_SECRET_STORE": "file",
            "INSPECTOR_PERSON_LOG": str(work / "person.jsonl"),
        }
        (work / "home").mkdir(exist_ok=True)

    def __call__(self, *args: str) -> tuple[dict[str, Any], str]:
        """The CLI's JSON result for `args`, and what it wrote on stderr."""
        command = [self.inspector, "--cli", self.url, "--transport", "http", "--format", "json",
                   *self.sign_in, *args]
        try:
            done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=CALL_SECONDS)
        except subprocess.TimeoutExpired as late:
            raise Failure(f"{' '.join(args)}: no answer in {CALL_SECONDS} s: {late.stderr!r}") from None
        check(done.returncode == 0, f"{' '.join(args)}: exit {done.returncode}: {done.stdout[-1500:]} {done.stderr[-3000:]}")
        try:
            return json.loads(done.stdout), done.stderr
        except ValueError:
            raise Failure(f"{' '.join(args)}: not JSON: {done.stdout[:1500]!r}") from None



def strict_tools(cli: Cli, name: str) -> set[str]:
    """`tools/list --strict`: the tools' names; fails on any schema finding."""
    listed, stderr = cli("--method", "tools/list", "--strict")
    findings = [f for tool in listed.get("schemaFindings") or [] for f in tool.get("findings", [])]
    warned = stderr.count('Warning: tool "')
    check(not findings and not warned, f"{name}: --strict reported {len(findings)} findings: {findings[:5]} {stderr[-1500:]}")
    names = {tool["name"] for tool in listed["result"].get("tools", [])}
    check(names, f"{name}: tools/list gave no tools: {json.dumps(listed)[:1500]}")
    step(f"{name}: tools/list --strict: {len(names)} tools, 0 schema findings")
    return names


def read(cli: Cli, tool: str, arguments: dict[str, Any]) -> Any:
    """The JSON a successful result's text carries (all the model reads); a tool error fails
    with its text."""
    answer, _ = cli("--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments))
    result = answer["result"]
    text = "".join(block.get("text", "") for block in result.get("content", []) if block.get("type") == "text")
    check(not result.get("isError"), f"{tool} answered a tool error: {text[:1500]}")
    try:
        return json.loads(text)
    except ValueError as error:
        raise Failure(f"{tool}'s text is not JSON ({error}): {text[:500]}") from None


def turn(cli: Cli) -> None:
    """The model's turn, from text only: awaiting_action, resolveAction, read on to complete."""
    started = read(cli, "run_turn", {"message": TRANSFER})
    check(started.get("state") == "awaiting_action", f"run_turn ended {started.get('state')!r}: {started}")
    action = started["action"]
    session, turn_id = started["sessionId"], started["turnId"]
    step(f"run_turn awaiting_action (read from text): {action['title']!r}, action {action['actionId']}")
    resolved = read(
        cli,
        "resolveAction",
        {
            "sessionId": session,
            "actionId": action["actionId"],
            "Idempotency-Key": f"ci-inspector-{action['actionId']}",
            "body": {
                "revision": action["revision"],
                "result": {"outcome": "approved", "digest": action["build"]["digest"]},
            },
        },
    )
    check(resolved.get("actionId") == action["actionId"], f"resolveAction answered {resolved}")
    step(f"resolveAction approved it: {resolved}")
    cursor, state, deadline = started["cursor"], None, time.monotonic() + 90
    while state != "complete":
        check(time.monotonic() < deadline, f"the turn did not complete; last state {state!r}")
        page = read(cli, "getChatEvents", {"sessionId": session, "cursor": cursor, "wait": 20000})
        for event in page.get("events", []):
            if event.get("turnId") == turn_id and event.get("type") == "turn_state":
                state = event.get("state")
                check(state in ("processing", "complete"), f"the turn went {state!r}: {event}")
        cursor = page.get("cursor", cursor)
    step("getChatEvents: the turn is complete")


def main(inspector: str, base: str) -> None:
    with tempfile.TemporaryDirectory() as work_dir:
        work = Path(work_dir)
        callback = f"http://127.0.0.1:{free_port()}/oauth/callback"
        documents = DocumentHost()
        metadata = OAuthClientMetadata(
            client_name="MCP Inspector (CI)",
            redirect_uris=[callback],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        )
        document = documents.serve("inspector", metadata)
        agent = Cli(inspector, f"{base}/v1/agent/mcp", work,
                    ["--client-metadata-url", document, "--callback-url", callback])
        names = strict_tools(agent, "Agent MCP")
        check({"run_turn", "resolveAction", "getChatEvents"} <= names, f"Agent MCP tools: {sorted(names)}")
        signed = [json.loads(line) for line in (work / "person.jsonl").read_text().splitlines()]
        check([s["client_id"] for s in signed] == [document], f"Agent MCP sign-ins: {signed}")
        check(documents.fetched(document) >= 1, "the server never fetched the document")
        step(f"Agent MCP: signed in as the document at {document} (fetched {documents.fetched(document)}x)")
        turn(agent)

        pipeline = Cli(inspector, f"{base}/v1/pipeline/mcp", work, ["--callback-url", callback])
        strict_tools(pipeline, "Pipeline MCP")
        signed = [json.loads(line) for line in (work / "person.jsonl").read_text().splitlines()]
        check(len(signed) == 2 and signed[1]["client_id"].startswith("cl_"), f"Pipeline MCP sign-ins: {signed}")
        step(f"Pipeline MCP: signed in as registered client {signed[1]['client_id']}")


if __name__ == "__main__":
    try:
        if len(sys.argv) == 3 and sys.argv[1] == "--browse":
            browse(sys.argv[2])
        elif len(sys.argv) == 3:
            began = time.monotonic()
            main(sys.argv[1], sys.argv[2].rstrip("/"))
            print(f"ok: the Inspector passed in {time.monotonic() - began:.1f} s")
        else:
            sys.exit("usage: python inspector.py MCP_INSPECTOR BASE_URL")
    except Failure as failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        sys.exit(1)
