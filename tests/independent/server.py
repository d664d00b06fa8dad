#!/usr/bin/env python3
"""Independent implementation of the Pipeline, Agent and Account interface.

Python 3.9+, standard library only, all state in memory.  See README.md for
the choices made where the interface document leaves a gap, and the faults.

    python3 server.py serve --port 0 --secret S [--cursor-ttl N] [--build-ttl N] [--fault NAME]...
    INTENT_RESOURCE=... INTENT_SCOPE=... INTENT_ACCOUNT=... python3 server.py token --secret S
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# --------------------------------------------------------------------------
# Configuration and faults
# --------------------------------------------------------------------------

FAULTS = {
    # the brief's list
    "wait-unbounded", "credential-name-late-char", "resolve-without-scope",
    "resolve-without-key", "resolve-other-build", "resolve-caller-fields",
    "turn-state-outside", "cursor-not-400", "stage-without-scope",
    "token-any-resource", "build-version-1", "commit-after-expiry",
    "no-resimulate", "page-top-level-messages", "session-leak",
    "error-outside-envelope", "session-id-161",
    # our own additions
    "foreign-cursor-ok", "expired-cursor-ok", "digest-unchecked",
    "commit-any-owner", "app-id-zero", "names-unlimited", "step-zero",
    "simulation-extra-field", "sse-extra-event", "sse-ignores-cursor",
    "wake-late", "page-repeats-last", "install-without-credential",
    "statement-not-json", "no-auth-check", "patch-ignored",
}

CFG = {"secret": b"", "cursor_ttl": None, "build_ttl": 300, "faults": set(), "port": 0}


def fault(name):
    return name in CFG["faults"]


def pause(seconds):
    """Sleeps. Not time.sleep: under libfaketime (CI runs the tests with the clock a year ahead)
    its clock_nanosleep fails with EINVAL, where a wait on an event does not."""
    threading.Event().wait(seconds)


PAGE_SIZE = 5
MAX_WAIT_MS = 30000
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
NAME_FIRST_RE = re.compile(r"^[A-Za-z_]")
LOCK = threading.RLock()        # guards all state below
CHANGED = threading.Condition(LOCK)  # notified on every append to any log
STOPPING = threading.Event()


def now_ms():
    return int(time.time() * 1000)


def b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(data):
    return hmac.new(CFG["secret"], data, hashlib.sha256).digest()


def canonical(value):
    """Canonical JSON: sorted keys, no whitespace, UTF-8 (RFC 8785 for the
    values we produce: strings, integers, booleans, null)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class Refusal(Exception):
    """A 4xx (or other) answer in the error envelope."""

    def __init__(self, status, kind, detail="", extra=None, headers=None):
        super().__init__(detail)
        self.status, self.kind, self.detail = status, kind, detail
        self.extra, self.headers = extra or {}, headers or {}


# --------------------------------------------------------------------------
# Tokens (our own format): itk1.<base64url claims>.<base64url HMAC-SHA256>
# --------------------------------------------------------------------------

def mint_token(resource, scope, account, ttl=3600):
    claims = {"aud": resource, "scp": " ".join(scope.split()), "sub": account,
              "iat": int(time.time()), "exp": int(time.time()) + ttl, "jti": secrets.token_hex(6)}
    body = b64u(canonical(claims))
    return "itk1." + body + "." + b64u(sign(("itk1." + body).encode()))


def read_token(token):
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != "itk1":
        return None
    try:
        if not hmac.compare_digest(unb64u(parts[2]), sign((parts[0] + "." + parts[1]).encode())):
            return None
        claims = json.loads(unb64u(parts[1]))
    except Exception:
        return None
    if not isinstance(claims, dict) or claims.get("exp", 0) < time.time():
        return None
    return claims


def resource_of(path):
    for prefix in ("/v1/agent/mcp", "/v1/pipeline/mcp", "/v1/agent", "/v1/pipeline", "/v1/account"):
        if path == prefix or path.startswith(prefix + "/"):
            return prefix
    return None


def base_urls():
    port = CFG["port"]
    return ["http://127.0.0.1:%d" % port, "http://localhost:%d" % port]


# --------------------------------------------------------------------------
# Chain models and the Pipeline (stateless Builds, passed by value)
# --------------------------------------------------------------------------

EVM_CHAIN_ID = 4242
SVM_CLUSTER = "localnet-indep"
EVM_FEE_WEI = 21000 * 1000000000      # 21000 gas at 1 gwei
SVM_FEE_LAMPORTS = 5000
EVM_ADDR = re.compile(r"^0x[0-9a-fA-F]{40}$")
SVM_ADDR = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{32,44}$")

# balances per chain; any unknown address holds 0
BALANCES = {
    "evm": {"0x1111111111111111111111111111111111111111": 10 ** 19,   # 10 ETH
            "0x2222222222222222222222222222222222222222": 10 ** 18},
    "svm": {"Sender111111111111111111111111111111111111": 10 ** 10,  # 10 SOL
            "Payee1111111111111111111111111111111111111": 10 ** 9},
}
COMMITTED = {}   # digest -> commit result (a Build commits once)

CATALOG_APPS = {
    "wallet": {
        "transfer": {"chain": "evm", "href": "/v1/pipeline/evm/build",
                     "summary": "Send native ETH on the independent EVM chain",
                     "inputSchema": {"type": "object", "additionalProperties": False,
                                     "required": ["from", "to", "wei"],
                                     "properties": {"from": {"type": "string", "pattern": EVM_ADDR.pattern},
                                                    "to": {"type": "string", "pattern": EVM_ADDR.pattern},
                                                    "wei": {"type": "string", "pattern": "^[0-9]{1,30}$"}}}},
        "transfer-sol": {"chain": "svm", "href": "/v1/pipeline/svm/stage",
                         "summary": "Send native SOL on the independent SVM cluster",
                         "inputSchema": {"type": "object", "additionalProperties": False,
                                         "required": ["from", "to", "lamports"],
                                         "properties": {"from": {"type": "string", "pattern": SVM_ADDR.pattern},
                                                        "to": {"type": "string", "pattern": SVM_ADDR.pattern},
                                                        "lamports": {"type": "string", "pattern": "^[0-9]{1,20}$"}}}},
    },
}
CATALOG_SKILLS = {
    "units": {
        "convert": {"inputSchema": {"type": "object", "additionalProperties": False,
                                    "required": ["amount", "from", "to"],
                                    "properties": {"amount": {"type": "string", "pattern": "^[0-9]{1,30}$"},
                                                   "from": {"enum": ["wei", "gwei", "eth", "lamport", "sol"]},
                                                   "to": {"enum": ["wei", "gwei", "eth", "lamport", "sol"]}}}},
    },
}
UNIT_EXP = {"wei": 0, "gwei": 9, "eth": 18, "lamport": 0, "sol": 9}
UNIT_FAMILY = {"wei": "evm", "gwei": "evm", "eth": "evm", "lamport": "svm", "sol": "svm"}


def check_name(value, what):
    if len(value) < 1 or (len(value) > 160 and not fault("names-unlimited")):
        raise Refusal(400, "name_length", "%s must be 1 to 160 characters" % what)


def validate_schema(schema, value, where="input"):
    """The small subset of JSON Schema our catalog uses."""
    if "enum" in schema:
        if value not in schema["enum"]:
            raise Refusal(400, "invalid_input", "%s must be one of %s" % (where, schema["enum"]))
        return
    if schema.get("type") == "object":
        if not isinstance(value, dict):
            raise Refusal(400, "invalid_input", "%s must be an object" % where)
        for key in schema.get("required", []):
            if key not in value:
                raise Refusal(400, "invalid_input", "%s.%s is required" % (where, key))
        props = schema.get("properties", {})
        for key, item in value.items():
            if key not in props:
                if schema.get("additionalProperties") is False:
                    raise Refusal(400, "invalid_input", "%s.%s is not allowed" % (where, key))
                continue
            validate_schema(props[key], item, where + "." + key)
    elif schema.get("type") == "string":
        if not isinstance(value, str):
            raise Refusal(400, "invalid_input", "%s must be a string" % where)
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise Refusal(400, "invalid_input", "%s does not match %s" % (where, schema["pattern"]))


def simulate(chain, actions):
    """Simulate the actions against the balances as they are now."""
    ledger = BALANCES[chain]
    evm = chain == "evm"
    asset, symbol, decimals = ("ETH", "ETH", 18) if evm else ("SOL", "SOL", 9)
    fee_each = EVM_FEE_WEI if evm else SVM_FEE_LAMPORTS
    where = {"chainId": EVM_CHAIN_ID} if evm else {"cluster": SVM_CLUSTER}
    local = {}
    changes, fees, guards, logs, warnings = [], [], [], [], []
    ok = True
    for action in actions:
        step = action["step"] if not fault("step-zero") else 0
        src, dst, amount = action["from"], action["to"], int(action["amount"])
        have = local.get(src, ledger.get(src, 0))
        need = amount + fee_each
        if need > have:
            ok = False
            guards.append({"name": "sufficient-balance", "status": "failed",
                           "message": "step %d needs %d, %s holds %d" % (action["step"], need, src, have)})
            continue
        guards.append({"name": "sufficient-balance", "status": "passed", "message": None})
        local[src] = have - need
        local[dst] = local.get(dst, ledger.get(dst, 0)) + amount
        common = dict(asset=asset, symbol=symbol, decimals=decimals, standard="native", step=step, **where)
        changes.append(dict(common, amount=str(amount), account=src, direction="out", counterparty=dst))
        changes.append(dict(common, amount=str(amount), account=dst, direction="in", counterparty=src))
        fees.append(dict(asset=asset, amount=str(fee_each), account=src, symbol=symbol,
                         decimals=decimals, kind="network", **where))
        logs.append(dict(address=src, topics=["transfer", dst], data=hex(amount), step=step, **where))
    if src_is_new_recipient(actions, ledger):
        warnings.append("a recipient holds nothing yet")
    gas = None
    if evm:
        units = 21000 * len(actions)
        gas = {"units": str(units), "priceWei": "1000000000", "nativeCost": str(units * 1000000000)}
    sim = {"status": "passed" if ok else "failed", "balanceChanges": changes, "approvals": [],
           "fees": fees, "warnings": warnings, "guards": guards, "gas": gas, "logs": logs}
    if fault("simulation-extra-field"):
        sim["engine"] = "indep"
    return sim, local


def src_is_new_recipient(actions, ledger):
    return any(ledger.get(a["to"], 0) == 0 for a in actions)


def parse_build_request(chain, body):
    """Our build request: {"app": "wallet", "steps": [{"op": "transfer", "args": {...}}],
    "simulate": true|false (optional, evm only)}."""
    if not isinstance(body, dict):
        raise Refusal(400, "invalid_request", "the body must be a JSON object")
    extra = set(body) - {"app", "steps", "simulate"}
    if extra:
        raise Refusal(400, "invalid_request", "unexpected members: %s" % ", ".join(sorted(extra)))
    app = body.get("app")
    if not isinstance(app, str):
        raise Refusal(400, "invalid_request", "app must be a string")
    check_name(app, "app")
    if app not in CATALOG_APPS:
        raise Refusal(404, "unknown_app", "no app %r" % app)
    steps = body.get("steps")
    if not isinstance(steps, list) or not 1 <= len(steps) <= 16:
        raise Refusal(400, "invalid_request", "steps must be an array of 1 to 16 items")
    simulate_flag = body.get("simulate", True)
    if not isinstance(simulate_flag, bool) or (chain == "svm" and simulate_flag is False):
        raise Refusal(400, "invalid_request", "simulate must be a boolean (svm always simulates)")
    actions, ops = [], []
    for i, step in enumerate(steps, 1):
        if not isinstance(step, dict) or set(step) - {"op", "args"} or not isinstance(step.get("op"), str):
            raise Refusal(400, "invalid_request", "steps[%d] must be {op, args}" % (i - 1))
        check_name(step["op"], "operation")
        op = CATALOG_APPS[app].get(step["op"])
        if op is None:
            raise Refusal(404, "unknown_operation", "app %s has no operation %r" % (app, step["op"]))
        if op["chain"] != chain:
            raise Refusal(400, "wrong_chain", "operation %s runs on %s" % (step["op"], op["chain"]))
        args = step.get("args")
        validate_schema(op["inputSchema"], args, "steps[%d].args" % (i - 1))
        amount = args["wei"] if chain == "evm" else args["lamports"]
        action = {"step": i, "op": step["op"], "kind": "native-transfer", "from": args["from"],
                  "to": args["to"], "amount": str(int(amount))}
        action.update({"chainId": EVM_CHAIN_ID} if chain == "evm" else {"cluster": SVM_CLUSTER})
        actions.append(action)
        ops.append({"app": app, "operation": step["op"], "step": i})
    return app, actions, ops, simulate_flag


def build_digest(build):
    core = {k: v for k, v in build.items() if k not in ("digest", "attestation")}
    return "sha256:" + hashlib.sha256(canonical(core)).hexdigest()


def attest(digest, owner, app, expires):
    msg = ("build|%s|%s|%s|%d" % (digest, owner, app, expires)).encode()
    return "hs256." + b64u(sign(msg))


def make_build(chain, app, actions, ops, owner, simulate_flag=True):
    with LOCK:
        sim, _ = simulate(chain, actions) if simulate_flag else (None, None)
    build = {"version": 1 if fault("build-version-1") else 2,
             "status": "simulated" if simulate_flag else "staged",
             "chain": chain, "actions": actions,
             "origin": {"app": app, "skills": [], "operations": ops},
             "summary": {"text": "%d transfer(s) on %s" % (len(actions), chain),
                         "issue": "bd_" + secrets.token_hex(6),
                         "total": str(sum(int(a["amount"]) for a in actions))},
             "expiresAt": int(time.time()) + CFG["build_ttl"]}
    if sim is not None:
        build["simulation"] = sim
    build["digest"] = build_digest(build)
    build["attestation"] = attest(build["digest"], owner, app, build["expiresAt"])
    return build


def commit_build(chain, build, owner):
    """Revalidate (shape, digest, attestation incl. owner and app, expiry), re-simulate, take custody."""
    for key in ("version", "status", "actions", "origin", "expiresAt", "digest", "attestation"):
        if key not in build:
            raise Refusal(400, "invalid_build", "the Build lacks %s" % key)
    if build.get("version") != 2 and not fault("build-version-1"):
        raise Refusal(400, "invalid_build", "version must be 2")
    if build.get("chain") != chain:
        raise Refusal(400, "wrong_chain", "this Build is not for %s" % chain)
    origin = build.get("origin")
    if not isinstance(origin, dict) or not isinstance(origin.get("app"), str):
        raise Refusal(400, "invalid_build", "origin.app is missing")
    expires = build.get("expiresAt")
    if not isinstance(expires, int) or isinstance(expires, bool):
        raise Refusal(400, "invalid_build", "expiresAt must be an integer")
    if not fault("digest-unchecked"):
        if build_digest(build) != build.get("digest"):
            raise Refusal(422, "digest_mismatch", "the Build does not match its digest")
        owners = [owner] if not fault("commit-any-owner") else None
        good = attest(build["digest"], owner, origin["app"], expires)
        if owners and not hmac.compare_digest(str(build.get("attestation")), good):
            raise Refusal(422, "attestation_mismatch", "the attestation does not hold for this Build and caller")
    if expires <= time.time() and not fault("commit-after-expiry"):
        raise Refusal(410, "build_expired", "the Build expired at %d" % expires)
    actions = build["actions"]
    if not isinstance(actions, list) or not all(
            isinstance(a, dict) and {"step", "from", "to", "amount"} <= set(a)
            and isinstance(a["amount"], str) and a["amount"].isdigit() and isinstance(a["step"], int)
            and isinstance(a["from"], str) and isinstance(a["to"], str) for a in actions):
        raise Refusal(400, "invalid_build", "actions are not ours")
    with LOCK:
        if build["digest"] in COMMITTED:
            raise Refusal(409, "already_committed", "this Build was committed already")
        sim, after = simulate(chain, actions)
        if fault("no-resimulate"):
            # The Build's own simulation stands in for a new one.
            sim = build.get("simulation") or sim
        if sim["status"] != "passed" and not fault("no-resimulate"):
            raise Refusal(422, "simulation_failed", "re-simulation failed: %s" % "; ".join(
                g["message"] for g in sim["guards"] if g["status"] == "failed"), {"simulation": sim})
        if fault("no-resimulate"):
            for a in actions:
                BALANCES[chain][a["from"]] = BALANCES[chain].get(a["from"], 0) - int(a["amount"])
                BALANCES[chain][a["to"]] = BALANCES[chain].get(a["to"], 0) + int(a["amount"])
        else:
            BALANCES[chain].update(after)
        result = {"custody": "taken", "chain": chain, "digest": build["digest"],
                  "receipts": [{"step": a["step"], "ref": "%s-%s-%d" % (chain, build["digest"][7:19], a["step"])}
                               for a in actions],
                  "simulation": sim, "committedAt": int(time.time())}
        COMMITTED[build["digest"]] = result
        return result


def lifecycle(chain, body, owner):
    if isinstance(body, dict) and "digest" in body and "attestation" in body:
        result = commit_build(chain, body, owner)
        meter(owner, "commit")
        return result
    app, actions, ops, simulate_flag = parse_build_request(chain, body)
    meter(owner, "build")
    return make_build(chain, app, actions, ops, owner, simulate_flag)


def skill_call(skill, operation, body):
    op = CATALOG_SKILLS[skill][operation]
    validate_schema(op["inputSchema"], body)
    if UNIT_FAMILY[body["from"]] != UNIT_FAMILY[body["to"]]:
        raise Refusal(422, "incompatible_units", "cannot convert %s to %s" % (body["from"], body["to"]))
    base = int(body["amount"]) * 10 ** UNIT_EXP[body["from"]]
    exp = UNIT_EXP[body["to"]]
    whole, frac = divmod(base, 10 ** exp)
    value = str(whole) + ("." + str(frac).rjust(exp, "0").rstrip("0") if frac else "")
    return {"skill": skill, "operation": operation, "value": value, "unit": body["to"]}


# --------------------------------------------------------------------------
# Agent: sessions, event logs, a tiny runtime, actions
# --------------------------------------------------------------------------

SESSIONS = {}   # id -> Session dict (internal)
TURN_STATES = ("processing", "complete", "failed", "interrupted", "awaiting_action")


class Session:
    def __init__(self, owner, title):
        self.id = "cv_" + secrets.token_hex(8)
        self.owner, self.title, self.archived = owner, title, False
        self.updated = now_ms()
        self.log = []           # durable entries
        self.partial = None     # transient snapshot of the message in progress
        self.actions = {}       # actionRef -> action record
        self.turns = {}         # turnRef -> state
        self.deleted = False

    def view(self):
        return {"id": self.id, "updatedAt": self.updated, "archived": self.archived, "title": self.title}

    def append(self, category, turn, **fields):
        with LOCK:
            entry = {"n": len(self.log) + 1, "category": category, "turnRef": turn, "at": now_ms()}
            entry.update(fields)
            self.log.append(entry)
            self.updated = now_ms()
            CHANGED.notify_all()
            return entry

    def set_state(self, turn, state):
        if fault("turn-state-outside") and state == "complete":
            state = "done"
        self.turns[turn] = state
        self.append("phase", turn, state=state)

    def busy(self):
        return any(s in ("processing", "awaiting_action") for s in self.turns.values())


def find_session(sid, account):
    if len(sid) > 160 and not fault("session-id-161"):
        raise Refusal(400, "session_id_too_long", "a session id has at most 160 characters")
    with LOCK:
        s = SESSIONS.get(sid)
        if s is None or s.deleted or (s.owner != account and not fault("session-leak")):
            raise Refusal(404, "no_such_session", "no session %s" % sid[:40])
        return s


SEND_RE = re.compile(r"\bsend\b", re.I)


def runtime_turn(session, turn, text):
    """Our tiny runtime, in a thread of its own per turn."""
    try:
        pause(0.15)
        if SEND_RE.search(text):
            m = re.search(r"\b(\d{1,24})\s*wei\b", text, re.I)
            amount = m.group(1) if m else "1000"
            build = make_build("evm", "wallet", [{"step": 1, "op": "transfer", "kind": "native-transfer",
                                                  "from": "0x1111111111111111111111111111111111111111",
                                                  "to": "0x3333333333333333333333333333333333333333",
                                                  "amount": str(int(amount)), "chainId": EVM_CHAIN_ID}],
                               [{"app": "wallet", "operation": "transfer", "step": 1}], session.owner)
            with LOCK:
                ref = "ar_" + secrets.token_hex(6)
                session.actions[ref] = {"ref": ref, "turn": turn, "revision": 1, "build": build,
                                        "status": "pending", "keys": {}}
                request = {"actionRef": ref, "revision": 1, "ask": "approve_transfer",
                           "question": "Send %s wei to 0x3333...3333?" % amount, "build": build,
                           "respond": {"method": "POST", "href": "/v1/agent/chat/%s/decisions/%s" % (session.id, ref)}}
                session.append("needs_decision", turn, request=request)
                session.set_state(turn, "awaiting_action")
            return
        reply = "You said: %s" % text[:200]
        words = reply.split(" ")
        for i in range(1, len(words) + 1):
            with LOCK:
                if session.turns.get(turn) != "processing":
                    return
                session.partial = {"turnRef": turn, "role": "assistant", "text": " ".join(words[:i])}
                CHANGED.notify_all()
            pause(0.08)
        finish(session, turn, reply, "complete")
    except Exception as exc:  # the turn fails, the server does not
        log("turn %s failed: %r" % (turn, exc))
        finish(session, turn, None, "failed")


def finish(session, turn, reply, state):
    with LOCK:
        if session.turns.get(turn) not in ("processing",):
            return
        session.partial = None
        if reply is not None:
            session.append("reply", turn, role="assistant", text=reply)
        session.set_state(turn, state)


def start_chat(account, body):
    if not isinstance(body, dict):
        raise Refusal(400, "invalid_request", "the body must be a JSON object")
    extra = set(body) - {"utterance", "conversation"}
    if extra:
        raise Refusal(400, "invalid_request", "unexpected members: %s" % ", ".join(sorted(extra)))
    text = body.get("utterance")
    if not isinstance(text, str) or not 1 <= len(text) <= 8000:
        raise Refusal(400, "invalid_request", "utterance must be a string of 1 to 8000 characters")
    sid = body.get("conversation")
    if sid is not None and not isinstance(sid, str):
        raise Refusal(400, "invalid_request", "conversation must be a session id")
    with LOCK:
        if sid is not None:
            session = find_session(sid, account)
            if session.busy():
                raise Refusal(409, "turn_in_progress", "the session's latest turn has not ended")
        else:
            session = Session(account, text[:60])
            SESSIONS[session.id] = session
        turn = "tn_" + secrets.token_hex(6)
        session.append("utterance", turn, role="user", text=text)
        session.set_state(turn, "processing")
        meter(account, "turn")
    threading.Thread(target=runtime_turn, args=(session, turn, text), daemon=True).start()
    return {"conversation": session.id, "turnRef": turn, "state": "processing"}


def patch_session(session, body):
    if not isinstance(body, dict) or not body:
        raise Refusal(400, "invalid_request", "the body must be an object with title and/or archived")
    extra = set(body) - {"title", "archived"}
    if extra:
        raise Refusal(400, "invalid_request", "unexpected members: %s" % ", ".join(sorted(extra)))
    if "title" in body and (not isinstance(body["title"], str) or len(body["title"]) > 200):
        raise Refusal(400, "invalid_request", "title must be a string of at most 200 characters")
    if "archived" in body and not isinstance(body["archived"], bool):
        raise Refusal(400, "invalid_request", "archived must be a boolean")
    with LOCK:
        if not fault("patch-ignored"):
            session.title = body.get("title", session.title)
            session.archived = body.get("archived", session.archived)
        session.updated = now_ms()
        return session.view()


# Resolution: POST /v1/agent/chat/{sessionId}/decisions/{actionRef}
#   header Dedup-Token, body {revision, result: {verdict: accept|decline, buildDigest}}
RESULT_FIELDS = {"verdict", "buildDigest", "note"}


def resolve(session, ref, body, key, raw_body):
    if not key and not fault("resolve-without-key"):
        raise Refusal(428, "dedup_token_required", "a resolution needs a Dedup-Token header")
    if not isinstance(body, dict) or set(body) - {"revision", "result"}:
        raise Refusal(400, "invalid_request", "the body must be {revision, result}")
    revision, result = body.get("revision"), body.get("result")
    if not isinstance(revision, (int, float)) or isinstance(revision, bool):
        raise Refusal(400, "invalid_request", "revision must be a number")
    if not isinstance(result, dict) or result.get("verdict") not in ("accept", "decline"):
        raise Refusal(400, "invalid_result", "result.verdict must be accept or decline")
    with LOCK:
        action = session.actions.get(ref)
        if action is None:
            raise Refusal(404, "no_such_action", "no action %s in this session" % ref[:40])
        fingerprint = hashlib.sha256(canonical(body)).hexdigest()
        if key and key in action["keys"]:
            prior_fp, prior_answer = action["keys"][key]
            if prior_fp != fingerprint:
                raise Refusal(422, "dedup_token_reused", "this Dedup-Token was used with another body")
            return prior_answer
        if action["status"] != "pending":
            raise Refusal(409, "already_resolved", "the action was resolved at revision %d" % action["revision"])
        if revision != action["revision"]:
            raise Refusal(409, "revision_mismatch", "the action is at revision %d" % action["revision"],
                          {"revision": action["revision"]})
        build = action["build"]
        if result.get("buildDigest") != build["digest"] and not fault("resolve-other-build"):
            raise Refusal(422, "not_the_reviewed_build", "the result must name the digest of the Build reviewed")
        extra = set(result) - RESULT_FIELDS
        if extra and not fault("resolve-caller-fields"):
            raise Refusal(422, "caller_fields", "a result carries no transaction fields: %s" % ", ".join(sorted(extra)))
        if "note" in result and not isinstance(result["note"], str):
            raise Refusal(400, "invalid_result", "note must be a string")
        recorded = {"verdict": result["verdict"], "buildDigest": build["digest"]}
        if fault("resolve-caller-fields"):
            recorded.update(result)
            for field in ("to", "amount", "from"):
                if field in result:
                    build = dict(build, actions=[dict(a, **{field: str(result[field])}) for a in build["actions"]])
        action["revision"] += 1
        action["status"] = "accepted" if result["verdict"] == "accept" else "declined"
        turn = action["turn"]
        session.append("decision", turn, actionRef=ref, revision=action["revision"], result=recorded)
        session.turns[turn] = "processing"
        session.append("phase", turn, state="processing")
        answer = {"actionRef": ref, "revision": action["revision"], "status": action["status"]}
        if key:
            action["keys"][key] = (fingerprint, answer)
    threading.Thread(target=after_decision, args=(session, turn, build, result["verdict"]), daemon=True).start()
    return answer


def after_decision(session, turn, build, verdict):
    pause(0.2)
    if verdict == "decline":
        return finish(session, turn, "Understood, nothing was sent.", "complete")
    try:
        done = commit_build("evm", build, session.owner) if not fault("resolve-caller-fields") else \
            {"digest": build["digest"], "receipts": [], "actions": build["actions"]}
        sent = ", ".join("%s wei to %s" % (a["amount"], a["to"]) for a in build["actions"])
        finish(session, turn, "Sent %s. Receipt %s." % (sent, json.dumps(done.get("receipts"))), "complete")
    except Refusal as r:
        finish(session, turn, "The transfer could not be committed: %s" % r.detail, "failed")


# Cursors: c1.<base64url {s, p, t}>.<HMAC>; position p in the session's log.
def make_cursor(session, pos):
    body = b64u(canonical({"s": session.id, "p": pos, "t": int(time.time() * 1000)}))
    return "c1." + body + "." + b64u(sign(("cursor|" + body).encode())[:18])


def read_cursor(session, cursor):
    """Returns the log position, or raises 400 invalid_cursor / 410 cursor_expired."""
    try:
        tag, body, mac = cursor.split(".")
        ok = tag == "c1" and hmac.compare_digest(unb64u(mac), sign(("cursor|" + body).encode())[:18])
        claims = json.loads(unb64u(body)) if ok else None
        ok = ok and isinstance(claims, dict) and isinstance(claims.get("p"), int)
    except Exception:
        ok, claims = False, None
    if not ok:
        if fault("cursor-not-400"):
            return 0
        raise Refusal(400, "invalid_cursor", "the cursor is not one of ours")
    if claims.get("s") != session.id and not fault("foreign-cursor-ok"):
        raise Refusal(400, "invalid_cursor", "the cursor belongs to another session")
    ttl = CFG["cursor_ttl"]
    if ttl is not None and time.time() * 1000 - claims["t"] > ttl * 1000 and not fault("expired-cursor-ok"):
        raise Refusal(410, "cursor_expired", "the cursor expired; read the session without one")
    return min(claims["p"], len(session.log))


def event_page(session, pos):
    with LOCK:
        if fault("page-repeats-last") and pos > 0:
            pos -= 1
        events = session.log[pos:pos + PAGE_SIZE]
        end = pos + len(events)
        page = {"session_id": session.id, "cursor": make_cursor(session, end),
                "events": [dict(e) for e in events], "has_more": end < len(session.log)}
        if fault("page-top-level-messages"):
            page["messages"] = [e for e in page["events"] if e["category"] in ("utterance", "reply")]
        return page, end


def parse_wait(query):
    raw = query.get("wait")
    if raw is None:
        return 0
    if not re.fullmatch(r"[0-9]{1,9}", raw):
        raise Refusal(400, "invalid_wait", "wait is an integer number of milliseconds, 0 to 30000")
    wait = int(raw)
    if wait > MAX_WAIT_MS:
        if fault("wait-unbounded"):
            return min(wait, 120000)
        raise Refusal(400, "wait_too_long", "wait is at most 30000 milliseconds")
    return wait


def poll(session, query):
    wait = parse_wait(query)
    cursor = query.get("from")
    pos = read_cursor(session, cursor) if cursor is not None else 0
    deadline = time.time() + wait / 1000.0
    with LOCK:
        while len(session.log) <= pos and not session.deleted and not STOPPING.is_set():
            left = deadline - time.time()
            if left <= 0:
                break
            CHANGED.wait(min(left, 1.0))
    if fault("wake-late"):
        pause(max(0, deadline - time.time()))
    return event_page(session, pos)[0]


# --------------------------------------------------------------------------
# Account: applications, credentials, statement
# --------------------------------------------------------------------------

ACCOUNT_APPS = {1: {"name": "ledger-export", "requires": ["EXPORT_KEY"]},
                2: {"name": "notes", "requires": []},
                3: {"name": "price-feed", "requires": ["FEED_ID", "FEED_SECRET"]}}
INSTALLED = {}     # account -> set(app ids)
CREDENTIALS = {}   # (account, app id) -> {name: value}
USAGE = {}         # account -> {item: count}
PRICES = {"turn": 2000, "build": 500, "commit": 1500, "skill": 100}   # micro-USD per use


def meter(account, item):
    with LOCK:
        USAGE.setdefault(account, {}).setdefault(item, 0)
        USAGE[account][item] += 1


def app_id(raw):
    if not re.fullmatch(r"[0-9]{1,12}", raw) or (int(raw) < 1 and not fault("app-id-zero")):
        raise Refusal(400, "invalid_application_id", "applicationId is a number, at least 1")
    number = int(raw)
    if number not in ACCOUNT_APPS:
        raise Refusal(404, "no_such_application", "no application %d" % number)
    return number


def cred_name(raw):
    ok = NAME_FIRST_RE.match(raw) and len(raw) <= 128 if fault("credential-name-late-char") else NAME_RE.match(raw)
    if not ok:
        raise Refusal(400, "invalid_credential_name", "a credential name matches ^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    return raw


def app_view(account, number):
    saved = CREDENTIALS.get((account, number), {})
    return {"applicationId": number, "name": ACCOUNT_APPS[number]["name"],
            "installed": number in INSTALLED.get(account, set()),
            "credentials": [{"name": n, "present": n in saved} for n in ACCOUNT_APPS[number]["requires"]]}


def install(account, number):
    with LOCK:
        saved = CREDENTIALS.get((account, number), {})
        missing = [n for n in ACCOUNT_APPS[number]["requires"] if n not in saved]
        if missing and not fault("install-without-credential"):
            raise Refusal(422, "credentials_missing", "save these credentials first: %s" % ", ".join(missing),
                          {"missing": missing})
        INSTALLED.setdefault(account, set()).add(number)
        return app_view(account, number)


def save_credential(account, number, body):
    if not isinstance(body, dict) or set(body) != {"name", "secret"} or not isinstance(body["secret"], str) \
            or not isinstance(body["name"], str):
        raise Refusal(400, "invalid_request", "the body is {name, secret}, both strings")
    name = cred_name(body["name"])
    if not 1 <= len(body["secret"]) <= 4096:
        raise Refusal(400, "invalid_request", "secret must be 1 to 4096 characters")
    with LOCK:
        CREDENTIALS.setdefault((account, number), {})[name] = body["secret"]
        return {"applicationId": number, "name": name, "saved": True}


def remove_credential(account, number, name):
    with LOCK:
        removed = CREDENTIALS.get((account, number), {}).pop(name, None) is not None
        return {"applicationId": number, "name": name, "removed": removed}


def statement(account):
    with LOCK:
        used = dict(USAGE.get(account, {}))
    lines = [{"item": item, "uses": n, "unitPriceMicroUsd": PRICES[item], "amountMicroUsd": n * PRICES[item]}
             for item, n in sorted(used.items())]
    return {"account": account, "currency": "USD", "unit": "micro-USD", "lines": lines,
            "totalMicroUsd": sum(line["amountMicroUsd"] for line in lines), "asOf": int(time.time())}


# --------------------------------------------------------------------------
# OAuth 2.1 authorization server (auto-approving; see README)
# --------------------------------------------------------------------------

CODES = {}     # code -> grant
DEVICES = {}   # device_code -> grant
CLIENT_RE = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
KNOWN_SCOPES = set("""agent:read agent:write agent:actions:resolve pipeline:catalog pipeline:execute
account:apps:read account:apps:write account:credentials:read account:credentials:write
account:credits:read account:credits:topup account:usage:read mcp:agent mcp:pipeline payments:submit
custody:delegate""".split())
RESOURCES = ("/v1/agent", "/v1/pipeline", "/v1/agent/mcp", "/v1/pipeline/mcp", "/v1/account")


def loopback_redirect(uri):
    try:
        u = urllib.parse.urlsplit(uri)
    except ValueError:
        return False
    return u.scheme == "http" and u.hostname in ("127.0.0.1", "localhost", "::1") and not u.fragment


def valid_resource(res):
    return any(res == b + r for b in base_urls() for r in RESOURCES)


def res_owns(res, scope):
    return scope.split(":")[0] == {"/v1/agent": "agent", "/v1/pipeline": "pipeline", "/v1/account": "account",
                                   "/v1/agent/mcp": "mcp", "/v1/pipeline/mcp": "mcp"}[res]


def check_scope(scope):
    words = scope.split()
    return bool(words) and all(w in KNOWN_SCOPES for w in words)


class OAuthError(Exception):
    def __init__(self, code, desc, status=400):
        super().__init__(desc)
        self.code, self.desc, self.status = code, desc, status


def authorize(query):
    """Returns (status, headers, body)."""
    client, redirect = query.get("client_id"), query.get("redirect_uri")
    if not client or not CLIENT_RE.match(client) or not redirect or not loopback_redirect(redirect):
        # never redirect to an unverified address (RFC 6749 4.1.2.1)
        raise OAuthError("invalid_request", "a public client with a loopback http redirect_uri is required")
    state = query.get("state")

    def back(params):
        if state is not None:
            params["state"] = state
        sep = "&" if urllib.parse.urlsplit(redirect).query else "?"
        return 302, {"Location": redirect + sep + urllib.parse.urlencode(params)}, None

    if query.get("response_type") != "code":
        return back({"error": "unsupported_response_type", "error_description": "only code"})
    if query.get("code_challenge_method") != "S256" or not re.fullmatch(r"[A-Za-z0-9_-]{43}", query.get("code_challenge", "")):
        return back({"error": "invalid_request", "error_description": "PKCE with S256 is required"})
    scope = query.get("scope", "agent:read")
    if not check_scope(scope):
        return back({"error": "invalid_scope", "error_description": "unknown scope"})
    resource = query.get("resource")
    if resource is not None and not valid_resource(resource):
        return back({"error": "invalid_target", "error_description": "unknown resource"})
    code = secrets.token_urlsafe(24)
    with LOCK:
        CODES[code] = {"client": client, "redirect": redirect, "challenge": query["code_challenge"],
                       "scope": scope, "resource": resource, "account": query.get("login_hint") or "primary",
                       "exp": time.time() + 60}
    return back({"code": code})


def token_endpoint(form):
    grant = form.get("grant_type")
    if not grant:
        raise OAuthError("invalid_request", "grant_type is required")
    if grant == "authorization_code":
        for key in ("code", "redirect_uri", "client_id", "code_verifier"):
            if not form.get(key):
                raise OAuthError("invalid_request", "%s is required" % key)
        with LOCK:
            g = CODES.pop(form["code"], None)
        if g is None or g["exp"] < time.time() or g["client"] != form["client_id"] or g["redirect"] != form["redirect_uri"]:
            raise OAuthError("invalid_grant", "the code is unknown, used, expired or not this client's")
        verifier = form["code_verifier"]
        if b64u(hashlib.sha256(verifier.encode()).digest()) != g["challenge"]:
            raise OAuthError("invalid_grant", "code_verifier does not match code_challenge")
    elif grant == "urn:ietf:params:oauth:grant-type:device_code":
        if not form.get("device_code") or not form.get("client_id"):
            raise OAuthError("invalid_request", "device_code and client_id are required")
        with LOCK:
            g = DEVICES.get(form["device_code"])
            if g is None or g["client"] != form["client_id"]:
                raise OAuthError("invalid_grant", "unknown device_code")
            if g["exp"] < time.time():
                raise OAuthError("expired_token", "the device code expired")
            DEVICES.pop(form["device_code"])
    else:
        raise OAuthError("unsupported_grant_type", "authorization_code and device_code only")
    resource = form.get("resource") or g["resource"]
    if not resource or not valid_resource(resource) or (g["resource"] and resource != g["resource"]):
        raise OAuthError("invalid_target", "a resource (RFC 8707) of this server is required")
    scope = form.get("scope") or g["scope"]
    if not set(scope.split()) <= set(g["scope"].split()):
        raise OAuthError("invalid_scope", "more scope than was granted")
    return {"access_token": mint_token(resource, scope, g["account"]), "token_type": "Bearer",
            "expires_in": 3600, "scope": scope}


def device_code(form):
    client = form.get("client_id")
    if not client or not CLIENT_RE.match(client):
        raise OAuthError("invalid_request", "client_id is required")
    scope = form.get("scope", "agent:read")
    if not check_scope(scope):
        raise OAuthError("invalid_scope", "unknown scope")
    resource = form.get("resource")
    if resource is not None and not valid_resource(resource):
        raise OAuthError("invalid_target", "unknown resource")
    dc, uc = secrets.token_urlsafe(24), secrets.token_hex(4).upper()
    with LOCK:
        # no real user: the device is approved as soon as it is issued
        DEVICES[dc] = {"client": client, "scope": scope, "resource": resource, "account": "primary",
                       "exp": time.time() + 600, "user_code": uc}
    verify = base_urls()[0] + "/api/auth/device"
    return {"device_code": dc, "user_code": uc, "verification_uri": verify,
            "verification_uri_complete": verify + "?user_code=" + uc, "expires_in": 600, "interval": 1}


def as_metadata():
    b = base_urls()[0]
    return {"issuer": b, "authorization_endpoint": b + "/api/auth/oauth2/authorize",
            "token_endpoint": b + "/api/auth/oauth2/token",
            "device_authorization_endpoint": b + "/api/auth/device/code",
            "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": ["authorization_code", "urn:ietf:params:oauth:grant-type:device_code"],
            "token_endpoint_auth_methods_supported": ["none"], "scopes_supported": sorted(KNOWN_SCOPES)}


# --------------------------------------------------------------------------
# HTTP layer: routing, authentication, envelopes
# --------------------------------------------------------------------------

SEG = r"([^/]*)"
ROUTES = []   # (method, compiled regex, scopes (any of), handler name)


def route(method, pattern, scopes):
    def wrap(fn):
        ROUTES.append((method, re.compile("^" + pattern + "$"), scopes, fn))
        return fn
    return wrap


def log(msg):
    sys.stderr.write("[indep] %s\n" % msg)
    sys.stderr.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "independent/1"

    def log_message(self, fmt, *args):
        log("%s %s" % (self.address_string(), fmt % args))

    # ---- answers
    def send_json(self, status, value, headers=None):
        data = json.dumps(value).encode()
        self.send_response(status)
        ctype = "application/json"
        if fault("statement-not-json") and self.path.startswith("/v1/account/statement"):
            ctype = "text/plain"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def refuse(self, r):
        body = {"error": dict({"kind": r.kind, "detail": r.detail}, **r.extra)}
        if fault("error-outside-envelope") and 400 <= r.status < 500:
            body = dict({"kind": r.kind, "detail": r.detail}, **r.extra)
        self.send_json(r.status, body, r.headers)

    # ---- request parts
    def body_bytes(self):
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        if not length:
            return b""
        if not length.strip().isdigit():
            raise Refusal(400, "invalid_request", "bad Content-Length")
        n = int(length)
        if n > 1 << 20:
            self.close_connection = True
            raise Refusal(413, "body_too_large", "bodies are at most 1 MiB")
        return self.rfile.read(n)

    def json_body(self, raw):
        if not raw.strip():
            raise Refusal(400, "invalid_request", "a JSON body is required")
        try:
            return json.loads(raw)
        except ValueError:
            raise Refusal(400, "invalid_json", "the body is not JSON")

    def authenticate(self, path, scopes):
        if fault("no-auth-check"):
            return "primary"
        header = self.headers.get("Authorization", "")
        meta = '%s/.well-known/oauth-protected-resource%s' % (base_urls()[0], resource_of(path))
        challenge = {"WWW-Authenticate": 'Bearer realm="independent", resource_metadata="%s"' % meta}
        if not header.startswith("Bearer ") or not header[7:].strip():
            raise Refusal(401, "unauthenticated", "a bearer token is required", headers=challenge)
        claims = read_token(header[7:].strip())
        if claims is None:
            raise Refusal(401, "invalid_token", "the token is malformed, forged or expired",
                          headers={"WWW-Authenticate": 'Bearer error="invalid_token", resource_metadata="%s"' % meta})
        wanted = [b + resource_of(path) for b in base_urls()]
        if claims.get("aud") not in wanted and not fault("token-any-resource"):
            raise Refusal(401, "wrong_resource", "the token is bound to another resource",
                          headers={"WWW-Authenticate": 'Bearer error="invalid_token", resource_metadata="%s"' % meta})
        held = set(str(claims.get("scp", "")).split())
        if scopes and not held & set(scopes):
            raise Refusal(403, "insufficient_scope", "this needs one of: %s" % " ".join(scopes),
                          headers={"WWW-Authenticate": 'Bearer error="insufficient_scope", scope="%s"' % " ".join(scopes)})
        return str(claims.get("sub"))

    # ---- dispatch
    def handle_any(self):
        try:
            url = urllib.parse.urlsplit(self.path)
            path = url.path
            query = {}
            for k, v in urllib.parse.parse_qsl(url.query, keep_blank_values=True):
                query.setdefault(k, v)
            raw = self.body_bytes()
            if path.startswith("/api/auth/") or path.startswith("/.well-known/"):
                return self.oauth(path, query, raw)
            matched_path = False
            for method, rx, scopes, fn in ROUTES:
                m = rx.match(path)
                if not m:
                    continue
                matched_path = True
                if method != self.command:
                    continue
                if fn is stage_scope_marker:
                    scopes = None if fault("stage-without-scope") else ["pipeline:execute"]
                    fn = route_svm
                if fn is resolve_scope_marker:
                    scopes = None if fault("resolve-without-scope") else ["agent:actions:resolve"]
                    fn = route_resolve
                account = self.authenticate(path, scopes)
                params = [urllib.parse.unquote(g) for g in m.groups()]
                result = fn(self, account, params, query, raw)
                if result is not None:
                    status, value = result
                    self.send_json(status, value)
                return
            if matched_path:
                raise Refusal(405, "method_not_allowed", "%s is not allowed here" % self.command)
            raise Refusal(404, "not_found", "no such resource")
        except Refusal as r:
            self.refuse(r)
        except OAuthError as e:
            self.send_json(e.status, {"error": e.code, "error_description": e.desc})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:
            log("internal error: %r" % exc)
            try:
                self.send_json(500, {"error": {"kind": "internal", "detail": "internal error"}})
            except Exception:
                pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    def oauth(self, path, query, raw):
        if path == "/.well-known/oauth-authorization-server" and self.command == "GET":
            return self.send_json(200, as_metadata())
        if path.startswith("/.well-known/oauth-protected-resource/") and self.command == "GET":
            res = path[len("/.well-known/oauth-protected-resource"):]
            if res not in RESOURCES:
                raise Refusal(404, "not_found", "no such resource")
            return self.send_json(200, {"resource": base_urls()[0] + res, "authorization_servers": [base_urls()[0]],
                                        "bearer_methods_supported": ["header"],
                                        "scopes_supported": sorted(w for w in KNOWN_SCOPES if res_owns(res, w))})
        if path == "/api/auth/oauth2/authorize" and self.command == "GET":
            status, headers, body = authorize(query)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path in ("/api/auth/oauth2/token", "/api/auth/device/code") and self.command == "POST":
            if not self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
                raise OAuthError("invalid_request", "the body must be application/x-www-form-urlencoded")
            form = dict(urllib.parse.parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=False))
            if path.endswith("/token"):
                return self.send_json(200, token_endpoint(form), {"Pragma": "no-cache"})
            return self.send_json(200, device_code(form))
        if path == "/api/auth/device" and self.command == "GET":
            return self.send_json(200, {"user_code": query.get("user_code"), "approved": True})
        if path in ("/api/auth/oauth2/authorize", "/api/auth/oauth2/token", "/api/auth/device/code"):
            raise Refusal(405, "method_not_allowed", "wrong method")
        raise Refusal(404, "not_found", "no such resource")

    # ---- SSE
    def stream(self, session, query):
        cursor = query.get("since")
        pos = read_cursor(session, cursor) if cursor is not None and not fault("sse-ignores-cursor") else 0
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        last_partial, last_beat = None, time.time()
        sent_first = False
        try:
            while not STOPPING.is_set():
                frames = []
                with LOCK:
                    if session.deleted:
                        frames.append(("resync", None, {"session_id": session.id, "reason": "session deleted"}))
                    elif len(session.log) > pos or not sent_first:
                        page, pos = event_page(session, pos)
                        frames.append(("page", page["cursor"], page))
                        sent_first = True
                    elif session.partial is not None and session.partial != last_partial:
                        last_partial = dict(session.partial)
                        frames.append(("message", None, last_partial))
                    else:
                        CHANGED.wait(0.5)
                for name, ident, data in frames:
                    text = "event: %s\n" % name
                    if ident:
                        text += "id: %s\n" % ident
                    text += "data: %s\n\n" % json.dumps(data)
                    self.wfile.write(text.encode())
                    self.wfile.flush()
                    last_beat = time.time()
                    if name == "resync":
                        return
                    if fault("sse-extra-event") and name == "page":
                        self.wfile.write(b"event: heartbeat\ndata: {}\n\n")
                if time.time() - last_beat > 10:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    last_beat = time.time()
        except (BrokenPipeError, ConnectionResetError, OSError):
            return


def stage_scope_marker():
    pass


def resolve_scope_marker():
    pass


# ---- route handlers: (handler, account, params, query, raw) -> (status, value) or None

@route("POST", r"/v1/pipeline/evm/build", ["pipeline:execute"])
def route_evm(h, account, params, query, raw):
    return 200, lifecycle("evm", h.json_body(raw), account)


ROUTES.append(("POST", re.compile(r"^/v1/pipeline/svm/stage$"), None, stage_scope_marker))


def route_svm(h, account, params, query, raw):
    return 200, lifecycle("svm", h.json_body(raw), account)


@route("GET", r"/v1/pipeline/apps/" + SEG + "/operations/" + SEG, ["pipeline:catalog", "pipeline:execute"])
def route_app_op(h, account, params, query, raw):
    app, op = params
    check_name(app, "app")
    check_name(op, "operation")
    if app not in CATALOG_APPS or op not in CATALOG_APPS[app]:
        raise Refusal(404, "unknown_operation", "no operation %s of app %s" % (op[:40], app[:40]))
    d = CATALOG_APPS[app][op]
    return 200, {"kind": "operation", "name": op, "app": app, "method": "POST", "href": d["href"],
                 "summary": d["summary"], "inputSchema": d["inputSchema"],
                 "request": {"app": app, "steps": [{"op": op, "args": "<inputSchema>"}]}}


@route("POST", r"/v1/pipeline/skills/" + SEG + "/operations/" + SEG, ["pipeline:catalog", "pipeline:execute"])
def route_skill(h, account, params, query, raw):
    skill, op = params
    check_name(skill, "skill")
    check_name(op, "operation")
    if skill not in CATALOG_SKILLS or op not in CATALOG_SKILLS[skill]:
        raise Refusal(404, "unknown_operation", "no operation %s of skill %s" % (op[:40], skill[:40]))
    result = skill_call(skill, op, h.json_body(raw))
    meter(account, "skill")
    return 200, result


def route_mcp(h, account, params, query, raw):
    raise Refusal(404, "not_offered", "this deployment offers no MCP resource")


for _m in ("GET", "POST", "DELETE"):
    ROUTES.append((_m, re.compile(r"^/v1/(?:pipeline|agent)/mcp(?:/.*)?$"), None, route_mcp))


@route("POST", r"/v1/agent/chat", ["agent:write"])
def route_chat(h, account, params, query, raw):
    return 201, start_chat(account, h.json_body(raw))


@route("GET", r"/v1/agent/chat/" + SEG, ["agent:read"])
def route_poll(h, account, params, query, raw):
    session = find_session(params[0], account)
    return 200, poll(session, query)


@route("GET", r"/v1/agent/chat/" + SEG + "/stream", ["agent:read"])
def route_stream(h, account, params, query, raw):
    session = find_session(params[0], account)
    h.stream(session, query)


ROUTES.append(("POST", re.compile(r"^/v1/agent/chat/" + SEG + "/decisions/" + SEG + "$"), None, resolve_scope_marker))


def route_resolve(h, account, params, query, raw):
    session = find_session(params[0], account)
    body = h.json_body(raw)
    return 200, resolve(session, params[1], body, h.headers.get("Dedup-Token", "").strip(), raw)


@route("GET", r"/v1/agent/sessions/" + SEG, ["agent:read"])
def route_get_session(h, account, params, query, raw):
    return 200, find_session(params[0], account).view()


@route("PATCH", r"/v1/agent/sessions/" + SEG, ["agent:write"])
def route_patch_session(h, account, params, query, raw):
    session = find_session(params[0], account)
    return 200, patch_session(session, h.json_body(raw))


@route("DELETE", r"/v1/agent/sessions/" + SEG, ["agent:write"])
def route_delete_session(h, account, params, query, raw):
    session = find_session(params[0], account)
    with LOCK:
        session.deleted = True
        for turn, state in session.turns.items():
            if state in ("processing", "awaiting_action"):
                session.turns[turn] = "interrupted"
        SESSIONS.pop(session.id, None)
        CHANGED.notify_all()
    return 200, {"deleted": session.id}


@route("POST", r"/v1/account/apps/" + SEG, ["account:apps:write"])
def route_install(h, account, params, query, raw):
    return 200, install(account, app_id(params[0]))


@route("DELETE", r"/v1/account/apps/" + SEG, ["account:apps:write"])
def route_uninstall(h, account, params, query, raw):
    number = app_id(params[0])
    with LOCK:
        INSTALLED.get(account, set()).discard(number)
        return 200, app_view(account, number)


@route("GET", r"/v1/account/apps/" + SEG, ["account:apps:read"])
def route_app(h, account, params, query, raw):
    return 200, app_view(account, app_id(params[0]))


@route("POST", r"/v1/account/apps/" + SEG + "/credentials", ["account:credentials:write"])
def route_save_credential(h, account, params, query, raw):
    return 201, save_credential(account, app_id(params[0]), h.json_body(raw))


@route("DELETE", r"/v1/account/apps/" + SEG + "/secrets/" + SEG, ["account:credentials:write"])
def route_remove_credential(h, account, params, query, raw):
    number = app_id(params[0])
    return 200, remove_credential(account, number, cred_name(params[1]))


@route("GET", r"/v1/account/statement", ["account:usage:read"])
def route_statement(h, account, params, query, raw):
    return 200, statement(account)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def serve(args):
    CFG["secret"] = args.secret.encode()
    CFG["cursor_ttl"] = args.cursor_ttl
    CFG["build_ttl"] = args.build_ttl
    unknown = set(args.fault) - FAULTS
    if unknown:
        sys.exit("unknown fault(s): %s; known: %s" % (", ".join(sorted(unknown)), ", ".join(sorted(FAULTS))))
    CFG["faults"] = set(args.fault)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    CFG["port"] = server.server_address[1]

    def stop(signum, frame):
        STOPPING.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if CFG["faults"]:
        log("faults: %s" % ", ".join(sorted(CFG["faults"])))
    print("listening on http://127.0.0.1:%d" % CFG["port"], flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        STOPPING.set()
        with LOCK:
            CHANGED.notify_all()
        server.server_close()


def token(args):
    secret = args.secret or os.environ.get("INDEPENDENT_SECRET")
    if not secret:
        sys.exit("token: --secret or INDEPENDENT_SECRET is required")
    resource = os.environ.get("INTENT_RESOURCE")
    if not resource:
        sys.exit("token: INTENT_RESOURCE is required")
    CFG["secret"] = secret.encode()
    print(mint_token(resource, os.environ.get("INTENT_SCOPE", ""), os.environ.get("INTENT_ACCOUNT") or "primary"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--secret", required=True)
    s.add_argument("--cursor-ttl", type=float, default=None)
    s.add_argument("--build-ttl", type=int, default=300)
    s.add_argument("--fault", action="append", default=[])
    t = sub.add_parser("token")
    t.add_argument("--secret", default=None)
    args = parser.parse_args()
    serve(args) if args.command == "serve" else token(args)


if __name__ == "__main__":
    main()
