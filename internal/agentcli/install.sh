#!/usr/bin/env bash
# Installs the coding agents that agentcli's test drives through the gateway
# (Claude Code and Codex, from npm, at the versions below) into .agentcli/ at
# the repository root (git-ignored), never globally. Idempotent: when those
# versions are already there it does nothing, so the README test command can
# run it every time. Needs Node 20 and npm (.ci/run installs them when
# missing). These two lines are the one place the versions are written; the
# test reads them from here.
CLAUDE_CODE_VERSION=2.1.197
CODEX_VERSION=0.171.0

set -euo pipefail
cd "$(dirname "$0")/../.."
dir=.agentcli
want="@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION @openai/codex@$CODEX_VERSION"
if [ -x "$dir/node_modules/.bin/claude" ] && [ -x "$dir/node_modules/.bin/codex" ] &&
  [ "$(cat "$dir/installed" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
command -v npm >/dev/null || {
  echo "internal/agentcli/install.sh: npm is not installed; install Node 20 and npm (Debian: apt-get install nodejs npm)" >&2
  exit 1
}
mkdir -p "$dir"
rm -f "$dir/installed"
echo "internal/agentcli/install.sh: installing $want into $dir/"
# --no-save and --no-package-lock: nothing is written outside node_modules,
# so no lock file (which would name the registry) exists to be committed.
npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund --loglevel=error $want
echo "$want" >"$dir/installed"
