#!/usr/bin/env bash
# Installs share for the current user and runs its agent as a systemd user service:
#   Deploy/install.sh            build (release), install ~/.local/bin/share, enable and start share-agent
#   Deploy/install.sh --remove   stop and disable the service, remove the unit (the binary and your data stay)
set -euo pipefail
cd "$(dirname "$0")/.."
UNIT_DIR=${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user
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
install -D -m 0644 Deploy/share-agent.service "$UNIT_DIR/share-agent.service"
mkdir -p "${XDG_CONFIG_HOME:-$HOME/.config}/share" "${XDG_DATA_HOME:-$HOME/.local/share}/share" \
  "${XDG_STATE_HOME:-$HOME/.local/state}/share"
"$HOME/.local/bin/share" id
if command -v systemctl > /dev/null && systemctl --user show-environment > /dev/null 2>&1; then
  systemctl --user daemon-reload
  systemctl --user enable --now share-agent.service
  systemctl --user --no-pager status share-agent.service | head -5
else
  echo "no systemd user session here: start the agent with: ~/.local/bin/share agent"
fi
