#!/usr/bin/env bash
# Installs share for the current user and runs its agent as a systemd user service:
#   Deploy/install.sh            build (release), install ~/.local/bin/share and share-watch, the man page, bash/zsh/fish
#                                completions, fix the agent's port in agent.json, enable and start share-agent
#   Deploy/install.sh --remove   stop and disable the service, remove the unit (the binary and your data stay)
# The XDG folders (XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_STATE_HOME) are honoured, by share and by the unit written here.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${XDG_CONFIG_HOME:-$HOME/.config}
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
STATE=${XDG_STATE_HOME:-$HOME/.local/state}
UNIT_DIR=$CONFIG/systemd/user
if [ "${1:-}" = "--remove" ]; then
  systemctl --user disable --now share-agent.service 2>/dev/null || true
  rm -f "$UNIT_DIR/share-agent.service"
  systemctl --user daemon-reload 2>/dev/null || true
  echo "share-agent removed; ~/.local/bin/share and your data were left in place"
  exit 0
fi
swift build -c release --static-swift-stdlib --product share
swift build -c release --static-swift-stdlib --product share-watch
install -D -m 0755 .build/release/share "$HOME/.local/bin/share"
install -D -m 0755 .build/release/share-watch "$HOME/.local/bin/share-watch"
install -D -m 0644 README.md "$HOME/.local/share/doc/share/README.md"
# The man page, generated from the command definitions (swift-argument-parser's generate-manual).
swift build -c release --product generate-manual > /dev/null
MAN_OUT=$(mktemp -d)
"$(swift build -c release --show-bin-path)/generate-manual" "$HOME/.local/bin/share" --output-directory "$MAN_OUT" \
  > /dev/null
install -D -m 0644 "$MAN_OUT/share.1" "$DATA/man/man1/share.1"
rm -rf "$MAN_OUT"
# Completions where each shell looks for a user's own.
"$HOME/.local/bin/share" --generate-completion-script bash > "$MAN_OUT.bash"
install -D -m 0644 "$MAN_OUT.bash" "$DATA/bash-completion/completions/share"
"$HOME/.local/bin/share" --generate-completion-script zsh > "$MAN_OUT.zsh"
install -D -m 0644 "$MAN_OUT.zsh" "$DATA/zsh/site-functions/_share"
"$HOME/.local/bin/share" --generate-completion-script fish > "$MAN_OUT.fish"
install -D -m 0644 "$MAN_OUT.fish" "$CONFIG/fish/completions/share.fish"
rm -f "$MAN_OUT.bash" "$MAN_OUT.zsh" "$MAN_OUT.fish"
# The unit may write only share's own folders, wherever XDG puts them.
mkdir -p "$CONFIG/share" "$DATA/share" "$STATE/share" "$UNIT_DIR"
sed -e "s|@CONFIG@|$CONFIG/share|" -e "s|@DATA@|$DATA/share|" -e "s|@STATE@|$STATE/share|" \
  Deploy/share-agent.service > "$UNIT_DIR/share-agent.service"
chmod 0644 "$UNIT_DIR/share-agent.service"
"$HOME/.local/bin/share" id
# A fixed port, saved once: devices that pair with this one keep reaching its agent.
echo "agent port: $("$HOME/.local/bin/share" agent --save-port)"
echo "man page: man share (add $DATA/man to MANPATH if it is not there); zsh: add $DATA/zsh/site-functions to fpath"
if command -v systemctl > /dev/null && systemctl --user show-environment > /dev/null 2>&1; then
  systemctl --user daemon-reload
  systemctl --user enable --now share-agent.service
  systemctl --user --no-pager status share-agent.service | head -5
else
  echo "no systemd user session here: start the agent with: ~/.local/bin/share agent"
fi
