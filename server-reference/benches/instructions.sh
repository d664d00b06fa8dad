#!/usr/bin/env bash
# Instructions per request of the release server, counted by callgrind (within 2% between two
# server processes, where time on a shared machine varies by 10%): `/healthz`, a session GET
# and a page GET of a session of three turns, each N times over one keep-alive connection, after
# N warm-up requests. A page GET asked again is answered from its head's page memo; page GETs
# alternating between two limits are each made anew, and so are page GETs at 12 distinct cursors
# in turn (of a second session, of six turns, each page holding 12 events).
# Run: cargo build --release -p intent-server && server-reference/benches/instructions.sh
# Needs valgrind and curl.
set -euo pipefail
binary=${1:-target/release/intent-server}
n=${N:-400}
port=18090
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$dir/out" "$binary" serve \
    --addr "127.0.0.1:$port" --data-dir "$dir/data" >"$dir/log" 2>&1 &
pid=$!
base=http://127.0.0.1:$port
for _ in $(seq 120); do curl -sf "$base/healthz" >/dev/null && break; sleep 1; done
token=$("$binary" token --sub bench --scope 'agent:read agent:write' \
    --resource "$base/v1/agent" --data-dir "$dir/data")
auth="authorization: Bearer $token"
session_of() { # turns: a session of that many finished turns
    local session=""
    for _ in $(seq "$1"); do
        body='{"message":"hello"'${session:+,\"sessionId\":\"$session\"}'}'
        session=$(curl -sf -H "$auth" -H 'content-type: application/json' -d "$body" \
            "$base/v1/agent/chat" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sessionId"])')
        sleep 3 # the turn completes
    done
    echo "$session"
}
session=$(session_of 3)
long=$(session_of 6)
cursor_urls=()
cursor=""
for _ in $(seq 12); do # the cursors after the long session's first 12 events, one by one
    cursor=$(curl -sf -H "$auth" "$base/v1/agent/chat/$long?limit=1${cursor:+&cursor=$cursor}" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["cursor"])')
    cursor_urls+=("$base/v1/agent/chat/$long?limit=12&cursor=$cursor")
done
count() { # name url... (taken in turn)
    local name=$1 urls=()
    shift
    while [ "${#urls[@]}" -lt "$n" ]; do urls+=("$@"); done
    curl -sf -H "$auth" "${urls[@]}" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    curl -sf -H "$auth" "${urls[@]}" >/dev/null
    callgrind_control -d "$pid" >/dev/null 2>&1
    local total
    total=$(grep -hE '^(summary|totals):' "$(ls -t "$dir"/out.* | head -1)" | head -1 | awk '{print $2}')
    echo "$name: $((total / ${#urls[@]})) instructions per request"
}
count "GET /healthz" "$base/healthz"
count "GET /v1/agent/sessions/{id}" "$base/v1/agent/sessions/$session"
count "GET /v1/agent/chat/{id}?limit=20" "$base/v1/agent/chat/$session?limit=20"
count "GET /v1/agent/chat/{id}?limit=19, then 20, in turn (made anew)" \
    "$base/v1/agent/chat/$session?limit=19" "$base/v1/agent/chat/$session?limit=20"
count "GET /v1/agent/chat/{id}?limit=12&cursor=..., 12 cursors in turn (made anew)" "${cursor_urls[@]}"
